#include "backends/gloo/store_adapter.h"

#include <algorithm>

namespace syncline::gloo_backend {
namespace {

using Clock = std::chrono::steady_clock;

// Gloo's own key names ("0", "1", "rank_0", ...) are generic; a prefix keeps
// them apart from whatever else the core keeps in the same scoped store.
std::string Scoped(const std::string& key) { return "gloo/" + key; }

}  // namespace

StoreAdapter::StoreAdapter(const sl_store_t* store, int rank, int size,
                           Clock::time_point deadline)
    : store_(store), rank_(rank), size_(size), deadline_(deadline) {}

int64_t StoreAdapter::RemainingMs(std::chrono::milliseconds cap) const {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  if (cap.count() > 0) left = std::min(left, cap);
  return std::max<int64_t>(1, left.count());
}

void StoreAdapter::Put(const std::string& key, const char* data, size_t len) {
  sl_error_t err;
  err.message[0] = '\0';
  const sl_result_t rc = store_->set(store_->ctx, Scoped(key).c_str(), data, len, &err);
  if (rc != SL_OK) {
    throw StoreError(rc, "store set of key '" + key + "' failed: " + err.message);
  }
}

std::vector<char> StoreAdapter::Fetch(const std::string& key,
                                      std::chrono::milliseconds cap,
                                      const std::string& what) {
  sl_error_t err;
  err.message[0] = '\0';
  void* value = nullptr;
  size_t len = 0;
  const sl_result_t rc =
      store_->get(store_->ctx, Scoped(key).c_str(), RemainingMs(cap), &value, &len, &err);
  if (rc != SL_OK) throw StoreError(rc, what + " failed: " + err.message);
  const char* bytes = static_cast<const char*>(value);
  std::vector<char> result(bytes, bytes + len);
  if (value != nullptr) store_->free_value(store_->ctx, value);
  return result;
}

int StoreAdapter::BlobRank(const std::string& key) const {
  if (key.empty() || key.size() >= 9 ||
      key.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  const int r = std::stoi(key);
  return r < size_ && r != rank_ ? r : -1;
}

std::vector<char> StoreAdapter::PeerBlob(int peer, std::chrono::milliseconds cap) {
  const std::string key = "pair/" + std::to_string(peer) + "/" + std::to_string(rank_);
  std::vector<char> entry =
      Fetch(key, cap, "waiting for rank " + std::to_string(peer) + "'s address (store key '" +
                          key + "')");
  // Gloo takes entry (rank > peer ? rank - 1 : rank) of (size - 1) equal ones.
  std::vector<char> blob(entry.size() * (size_ - 1), 0);
  const size_t slot = rank_ > peer ? rank_ - 1 : rank_;
  std::copy(entry.begin(), entry.end(), blob.begin() + slot * entry.size());
  return blob;
}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  const bool own_blob = size_ > 1 && key == std::to_string(rank_) && !data.empty() &&
                        data.size() % (size_ - 1) == 0;
  if (!own_blob) {
    Put(key, data.data(), data.size());
    return;
  }
  const size_t entry = data.size() / (size_ - 1);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const size_t slot = peer < rank_ ? peer : peer - 1;
    Put("pair/" + std::to_string(rank_) + "/" + std::to_string(peer),
        data.data() + slot * entry, entry);
  }
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  std::vector<char> result;
  if (auto it = waited_.find(key); it != waited_.end()) {
    result = std::move(it->second);
    waited_.erase(it);
  } else if (const int peer = BlobRank(key); peer >= 0) {
    result = PeerBlob(peer, std::chrono::milliseconds(0));
  } else {
    result = Fetch(key, std::chrono::milliseconds(0), "store get of key '" + key + "'");
  }
  if (const int peer = BlobRank(key); peer >= 0) rank_values_[peer] = result;
  return result;
}

void StoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(0));
}

void StoreAdapter::wait(const std::vector<std::string>& keys,
                        const std::chrono::milliseconds& timeout) {
  // The C store has no separate wait: a get that blocks until the key
  // exists does the same, and its value is kept for the get that follows.
  for (const std::string& key : keys) {
    if (waited_.count(key)) continue;
    const int peer = BlobRank(key);
    waited_[key] = peer >= 0 ? PeerBlob(peer, timeout)
                             : Fetch(key, timeout, "waiting for store key '" + key + "'");
  }
}

}  // namespace syncline::gloo_backend
