// backend_comm.cc: shared ownership of a plugin communicator.
#include "backend_comm.h"

#include "store_adapter.h"
#include "syncline/log.h"

namespace syncline::internal {

BackendComm::BackendComm(const sl_backend_t* table, std::shared_ptr<Store> store)
    : table_(table), store_(std::move(store)) {
  if (store_ != nullptr) cstore_ = MakeCStore(store_.get());
}

BackendComm::~BackendComm() {
  // Every Work has freed its request by now: it holds this object until then.
  if (comm_ != nullptr) table_->comm_destroy(comm_);
}

size_t BackendComm::Track(sl_request_t* request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_slots_.empty()) {
    requests_.push_back(request);
    return requests_.size() - 1;
  }
  const size_t slot = free_slots_.back();
  free_slots_.pop_back();
  requests_[slot] = request;
  return slot;
}

void BackendComm::Untrack(size_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[slot] = nullptr;
  free_slots_.push_back(slot);
}

void BackendComm::Close() {
  if (comm_ == nullptr || closed_with_running_ops_.load()) return;
  size_t running = 0;
  {
    // A Work frees its request only after Untrack, so each one is valid here.
    std::lock_guard<std::mutex> lock(mu_);
    for (sl_request_t* request : requests_) {
      if (request == nullptr) continue;  // a free slot
      int done = 0;
      sl_error_t err{};
      (void)table_->request_test(request, &done, &err);
      if (!done) ++running;
    }
  }
  if (running == 0) return;
  SL_LOG(WARN, "a %s communicator was destroyed while %d of its ops were still running; "
         "they are aborted", table_->name, running);
  // Before the abort, so that a Work that sees SL_ERR_ABORTED knows why.
  closed_with_running_ops_.store(true, std::memory_order_release);
  sl_error_t err{};
  (void)table_->comm_abort(comm_, &err);
}

}  // namespace syncline::internal
