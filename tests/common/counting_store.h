// counting_store.h: a Store that counts what one rank asks of another.
//
// Tests of cost at scale wrap each simulated rank's store in a CountingStore
// and assert how the rank's requests and the bytes it read grow with the
// world size. Counts can be limited to keys that contain a given substring
// (e.g. "ucx/peer/": only the UCX backend's address reads).
//
// Thread safety: like the wrapped store; the counters are atomic.
#ifndef SYNCLINE_TESTS_COMMON_COUNTING_STORE_H_
#define SYNCLINE_TESTS_COMMON_COUNTING_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "syncline/store.h"

namespace syncline::testing {

class CountingStore final : public Store {
 public:
  // `before_get`, if set, runs before each Get is passed on. Only keys that
  // contain `filter` are counted ("" counts all).
  explicit CountingStore(std::shared_ptr<Store> base,
                         std::function<void(absl::string_view)> before_get = {},
                         std::string filter = "")
      : base_(std::move(base)), before_get_(std::move(before_get)),
        filter_(std::move(filter)) {}
  absl::Status Set(absl::string_view k, absl::string_view v) override {
    Count(k);
    return base_->Set(k, v);
  }
  absl::StatusOr<std::string> Get(absl::string_view k, absl::Duration t) override {
    const bool counted = Count(k);
    if (before_get_) before_get_(k);
    absl::StatusOr<std::string> value = base_->Get(k, t);
    if (counted && value.ok()) bytes_read_ += static_cast<int64_t>(value->size());
    return value;
  }
  absl::StatusOr<int64_t> Add(absl::string_view k, int64_t d) override {
    Count(k);
    return base_->Add(k, d);
  }
  absl::Status Wait(absl::Span<const std::string> k, absl::Duration t) override {
    CountKeys(k);
    return base_->Wait(k, t);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view k, absl::string_view e,
                                         absl::string_view d) override {
    Count(k);
    return base_->CompareSet(k, e, d);
  }
  absl::StatusOr<bool> Delete(absl::string_view k) override {
    Count(k);
    return base_->Delete(k);
  }
  absl::StatusOr<int64_t> NumKeys() override {
    Count("");
    return base_->NumKeys();
  }
  absl::StatusOr<std::vector<bool>> Check(absl::Span<const std::string> k) override {
    CountKeys(k);
    return base_->Check(k);
  }
  // Requests made, keys they named, and value bytes that Get returned.
  int requests() const { return requests_; }
  int keys() const { return keys_; }
  int64_t bytes_read() const { return bytes_read_; }

 private:
  bool Count(absl::string_view key) {
    if (!filter_.empty() && key.find(filter_) == absl::string_view::npos) return false;
    ++requests_;
    ++keys_;
    return true;
  }
  void CountKeys(absl::Span<const std::string> keys) {
    int counted = 0;
    for (const std::string& k : keys) {
      counted += filter_.empty() || k.find(filter_) != std::string::npos;
    }
    if (counted == 0) return;
    ++requests_;
    keys_ += counted;
  }
  std::shared_ptr<Store> base_;
  std::function<void(absl::string_view)> before_get_;
  const std::string filter_;
  std::atomic<int> requests_{0};
  std::atomic<int> keys_{0};
  std::atomic<int64_t> bytes_read_{0};
};

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_COMMON_COUNTING_STORE_H_
