// hash_store.cc: the in-memory Store.
#include <condition_variable>
#include <map>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store_util.h"
#include "syncline/store.h"

namespace syncline {
namespace {

// Thread safety: every method locks mu_; waiters sleep on cv_.
class HashStore final : public Store {
 public:
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    std::lock_guard<std::mutex> lock(mu_);
    data_[std::string(key)] = std::string(value);
    cv_.notify_all();
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    std::string k(key);
    SL_RETURN_IF_ERROR(Wait({&k, 1}, timeout));
    std::lock_guard<std::mutex> lock(mu_);
    return data_[k];
  }

  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string& slot = data_[std::string(key)];
    int64_t value = 0;
    if (!slot.empty() && !absl::SimpleAtoi(slot, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "store key '", key, "' holds a non-integer value; Add needs an integer"));
    }
    value += delta;
    slot = absl::StrCat(value);
    cv_.notify_all();
    return value;
  }

  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    absl::Time deadline = absl::Now() + timeout;
    while (true) {
      std::vector<std::string> missing;
      for (const std::string& k : keys) {
        if (data_.count(k) == 0) missing.push_back(k);
      }
      if (missing.empty()) return absl::OkStatus();
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return internal_store::MissingKeysError("hash store", missing, timeout);
      }
      cv_.wait_for(lock, absl::ToChronoNanoseconds(
                             std::min(left, absl::Milliseconds(100))));
    }
  }

  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(std::string(key));
    if ((it == data_.end() && expected.empty()) ||
        (it != data_.end() && it->second == expected)) {
      data_[std::string(key)] = std::string(desired);
      cv_.notify_all();
      return std::string(desired);
    }
    return it == data_.end() ? std::string() : it->second;
  }

  absl::StatusOr<bool> Delete(absl::string_view key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return data_.erase(std::string(key)) > 0;
  }

  absl::StatusOr<int64_t> NumKeys() override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(data_.size());
  }

  absl::StatusOr<std::vector<bool>> Check(
      absl::Span<const std::string> keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<bool> out;
    for (const std::string& k : keys) out.push_back(data_.count(k) > 0);
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;  // guarded by mu_
};

}  // namespace

std::shared_ptr<Store> MakeHashStore() { return std::make_shared<HashStore>(); }

}  // namespace syncline
