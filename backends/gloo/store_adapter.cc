#include "backends/gloo/store_adapter.h"

#include <algorithm>

namespace syncline::gloo_backend {
namespace {

using Clock = std::chrono::steady_clock;

// Gloo's own key names ("0", "1", "rank_0", ...) are generic; a prefix keeps
// them apart from whatever else the core keeps in the same scoped store.
std::string Scoped(const std::string& key) { return "gloo/" + key; }

}  // namespace

StoreAdapter::StoreAdapter(const sl_store_t* store, Clock::time_point deadline)
    : store_(store), deadline_(deadline) {}

int64_t StoreAdapter::RemainingMs(std::chrono::milliseconds cap) const {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  if (cap.count() > 0) left = std::min(left, cap);
  return std::max<int64_t>(1, left.count());
}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  sl_error_t err;
  err.message[0] = '\0';
  const sl_result_t rc =
      store_->set(store_->ctx, Scoped(key).c_str(), data.data(), data.size(), &err);
  if (rc != SL_OK) {
    throw StoreError(rc, "store set of key '" + key + "' failed: " + err.message);
  }
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  sl_error_t err;
  err.message[0] = '\0';
  void* value = nullptr;
  size_t len = 0;
  const sl_result_t rc =
      store_->get(store_->ctx, Scoped(key).c_str(),
                  RemainingMs(std::chrono::milliseconds(0)), &value, &len, &err);
  if (rc != SL_OK) {
    throw StoreError(rc, "store get of key '" + key + "' failed: " + err.message);
  }
  const char* bytes = static_cast<const char*>(value);
  std::vector<char> result(bytes, bytes + len);
  if (value != nullptr) store_->free_value(store_->ctx, value);
  if (!key.empty() && key.size() < 9 &&
      key.find_first_not_of("0123456789") == std::string::npos) {
    rank_values_[std::stoi(key)] = result;
  }
  return result;
}

void StoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(0));
}

void StoreAdapter::wait(const std::vector<std::string>& keys,
                        const std::chrono::milliseconds& timeout) {
  // The C store has no separate wait: a get that blocks until the key
  // exists does the same, and the value is small (a few addresses).
  for (const std::string& key : keys) {
    sl_error_t err;
    err.message[0] = '\0';
    void* value = nullptr;
    size_t len = 0;
    const sl_result_t rc = store_->get(store_->ctx, Scoped(key).c_str(),
                                       RemainingMs(timeout), &value, &len, &err);
    if (rc != SL_OK) {
      throw StoreError(rc, "waiting for store key '" + key + "' failed: " + err.message);
    }
    if (value != nullptr) store_->free_value(store_->ctx, value);
  }
}

}  // namespace syncline::gloo_backend
