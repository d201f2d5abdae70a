// work_impl.h: the Work returned by Communicator, over a plugin request.
#ifndef SYNCLINE_CORE_SRC_WORK_IMPL_H_
#define SYNCLINE_CORE_SRC_WORK_IMPL_H_

#include <memory>
#include <string>

#include "backend_comm.h"
#include "flight_recorder.h"
#include "op_label.h"
#include "syncline/plugin_abi.h"
#include "syncline/work.h"

namespace syncline::internal {

// Owns one sl_request_t and frees it on destruction, and holds the plugin
// communicator it was posted on until then (backend_comm.h), so it may
// outlive its Communicator. `label` (put into words only when needed)
// prefixes every error, e.g. "allreduce #17 (f32 x 1024, sum) on rank 1/4
// over gloo"; its `where` lives in the communicator's flight recorder,
// which `backend` holds.
// Thread safety: as Work (one thread at a time).
class PluginWork final : public Work {
 public:
  PluginWork(std::shared_ptr<BackendComm> backend, sl_request_t* request, const OpLabel& label);
  ~PluginWork() override;

  absl::Status Wait(absl::Duration timeout) override;
  // request_stream_wait when the table has it; otherwise Wait().
  absl::Status WaitStream(void* stream) override;
  bool Test() override;
  absl::Status status() override;
  uint64_t seq() const override { return seq_; }
  std::string Describe() const override { return label_.ToString(); }

  // A Work per op was the core's one heap allocation on an op's path (the
  // 8-byte allreduce, issue 16): its storage is recycled instead, a few
  // blocks kept per thread (syncline/plugin_sdk/block_cache.h).
  static void* operator new(size_t size);
  static void operator delete(void* block, size_t size) noexcept;

 private:
  absl::Status Finish(sl_result_t result, const sl_error_t& err);

  const std::shared_ptr<BackendComm> backend_;
  const sl_backend_t* const table_;
  sl_request_t* request_;
  const size_t slot_;  // in backend_'s tracked requests
  const uint64_t seq_;
  const OpLabel label_;
  FlightRecorder* const recorder_;  // backend_'s, which keeps it (and label_.where) alive
  bool done_ = false;
  absl::Status final_;
};

// Readies an sl_error_t for a call on an op's path (post, wait, test).
// A plugin writes its NUL-terminated message only when the call fails, so
// the first byte (an empty message) and the last (a bound for one that
// forgets its terminator) are all that need setting: zeroing all 1 KiB, as
// `sl_error_t err{}` does, cost about as much as the rest of a Wait on the
// 8-byte allreduce (issue 16).
inline void ClearForCall(sl_error_t& err) {
  err.message[0] = '\0';
  err.message[sizeof(err.message) - 1] = '\0';
}

// A Work that is already complete (ops with nothing to move).
std::unique_ptr<Work> MakeCompletedWork(uint64_t seq, std::string context,
                                        absl::Status status);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_WORK_IMPL_H_
