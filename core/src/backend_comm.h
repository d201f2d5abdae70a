// backend_comm.h: one plugin communicator (sl_comm_t), shared by its
// Communicator and by every Work posted on it.
//
// plugin_abi.h asks that every request be freed before comm_destroy, and that
// the store given to comm_create stay valid until comm_destroy returns. A
// caller may destroy a Communicator before its Works, so neither owns the
// sl_comm_t alone: the last of them to go destroys it, after the last
// request_free.
//
// When the Communicator goes while one of its ops is still running, Close()
// aborts the plugin communicator: those ops end at once with SL_ERR_ABORTED,
// and their Works say that the communicator was destroyed before they
// finished (work.h). Ops that had ended keep their result.
//
// Thread safety: every method may be called from any thread.
#ifndef SYNCLINE_CORE_SRC_BACKEND_COMM_H_
#define SYNCLINE_CORE_SRC_BACKEND_COMM_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "syncline/plugin_abi.h"
#include "syncline/store.h"

namespace syncline::internal {

class FlightRecorder;

class BackendComm {
 public:
  // `store` (null for none) backs the C view that store() hands the plugin.
  BackendComm(const sl_backend_t* table, std::shared_ptr<Store> store);
  // comm_destroy, when a communicator was made.
  ~BackendComm();
  BackendComm(const BackendComm&) = delete;
  BackendComm& operator=(const BackendComm&) = delete;

  const sl_backend_t* table() const { return table_; }
  // The Communicator's flight recorder, set once before any op is posted:
  // a Work reaches it through the BackendComm it holds anyway (one shared
  // pointer a Work, not two: their counts are atomic operations per op).
  void set_recorder(std::shared_ptr<FlightRecorder> recorder) { recorder_ = std::move(recorder); }
  FlightRecorder* recorder() const { return recorder_.get(); }
  sl_comm_t* comm() const { return comm_; }
  // Where comm_create / comm_split write the new communicator (once).
  sl_comm_t** comm_slot() { return &comm_; }
  // The C view of the store for comm_create / comm_split; null without one.
  const sl_store_t* store() const { return store_ != nullptr ? &cstore_ : nullptr; }

  // A Work holds `request` from its creation until just before request_free.
  // Track() returns the request's slot, which Untrack() takes back.
  size_t Track(sl_request_t* request);
  void Untrack(size_t slot);

  // The Communicator is being destroyed: aborts the plugin communicator if a
  // tracked request is still running. Idempotent.
  void Close();
  // True once Close() has aborted running ops.
  bool closed_with_running_ops() const {
    return closed_with_running_ops_.load(std::memory_order_acquire);
  }

 private:
  const sl_backend_t* const table_;
  sl_comm_t* comm_ = nullptr;
  const std::shared_ptr<Store> store_;
  sl_store_t cstore_{};
  std::mutex mu_;
  // Tracked requests by slot (null: free). Slots are reused, so tracking
  // allocates nothing once the vector holds the most ops ever in flight (a
  // std::set cost a node allocation per op, on the 8-byte path).
  std::vector<sl_request_t*> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> free_slots_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> closed_with_running_ops_{false};
  std::shared_ptr<FlightRecorder> recorder_;
};

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_BACKEND_COMM_H_
