// prefix_store.cc: scopes every key of another store under "<prefix>/".
#include "absl/strings/str_cat.h"
#include "syncline/store.h"

namespace syncline {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : prefix_(std::move(prefix)), base_(std::move(base)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return base_->Set(K(key), value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    return base_->Get(K(key), timeout);
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    return base_->Add(K(key), delta);
  }
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    return base_->Wait(Ks(keys), timeout);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    return base_->CompareSet(K(key), expected, desired);
  }
  absl::StatusOr<bool> Delete(absl::string_view key) override {
    return base_->Delete(K(key));
  }
  absl::StatusOr<int64_t> NumKeys() override { return base_->NumKeys(); }
  absl::StatusOr<std::vector<bool>> Check(
      absl::Span<const std::string> keys) override {
    return base_->Check(Ks(keys));
  }

 private:
  std::string K(absl::string_view key) const {
    return absl::StrCat(prefix_, "/", key);
  }
  std::vector<std::string> Ks(absl::Span<const std::string> keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const std::string& k : keys) out.push_back(K(k));
    return out;
  }

  const std::string prefix_;
  const std::shared_ptr<Store> base_;
};

}  // namespace

std::shared_ptr<Store> MakePrefixStore(std::string prefix,
                                       std::shared_ptr<Store> base) {
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(base));
}

}  // namespace syncline
