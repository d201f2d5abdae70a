// recorder.h: the trace interposer's per-process store of op events, its
// Chrome trace / Perfetto JSON writer and its per-op summary.
//
// Every traced communicator of a process records into the one Recorder, and
// the process writes one file, <SYNCLINE_TRACE_DIR or .>/trace-rank<r>.json,
// where r is the rank of the first communicator the process created (its
// rank in the job). The file is rewritten, whole, whenever a communicator is
// destroyed and once more at exit if anything changed since; when the last
// live communicator is destroyed (or at exit, if ops were recorded since),
// the per-op summary is printed on stderr. Writing on destroy, not only at
// exit, matters: processes that leave with _exit() or a signal never run
// atexit handlers.
//
// Times are wall-clock microseconds since the epoch, so that files from the
// ranks of one machine (or of NTP-synchronized machines) line up when
// merged by tools/syncline-trace-merge.
//
// What each op records (and how exact it is):
//   queued    when the core posted the op to this layer (exact);
//   finished  when the caller first saw the op end, through request_test or
//             request_wait (late if the caller polls late);
//   started   estimated when the file is written: a backend runs one
//             communicator's collectives in order, so collective #k starts
//             when it is queued or when #k-1 finished, whichever is later.
//
// Thread safety: every method may be called from any thread (one mutex).
#ifndef SYNCLINE_PLUGINS_TRACE_RECORDER_H_
#define SYNCLINE_PLUGINS_TRACE_RECORDER_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "syncline/plugin_abi.h"

namespace syncline::plugin::trace {

// One op, as the trace interposer saw it.
struct TraceEvent {
  uint64_t comm_id = 0;
  int comm_rank = 0;
  int comm_size = 1;
  sl_op_kind_t kind = SL_OP_BARRIER;
  uint64_t seq = 0;
  int dtype = 0;
  uint64_t count = 0;  // elements per rank
  uint64_t bytes = 0;  // as nccl-tests counts them (OpBytes)
  int redop = -1;
  int root = -1;
  int peer = -1;
  uint32_t tag = 0;
  int64_t queued_us = 0;
  int64_t finished_us = -1;  // -1: freed before anyone saw it end
  sl_result_t result = SL_OK;
  std::string error;  // the op's message when result != SL_OK
};

// Wall-clock microseconds since the epoch.
int64_t NowMicros();

// Events kept per process (about 200 MB at most); later ones are counted,
// not stored, so a long job cannot exhaust memory by tracing.
constexpr size_t kMaxEvents = size_t{1} << 20;

class Recorder {
 public:
  // The process's recorder, created (and an atexit flush registered) on
  // first use. Never destroyed: a late op may still record during exit.
  static Recorder& Get();

  // A traced communicator of rank `rank` out of `size` was created.
  void CommCreated(int rank, int size);
  // One was destroyed: writes the file; prints the summary if it was the
  // last live one.
  void CommDestroyed();
  void Record(TraceEvent event);
  // At exit: writes the file and prints the summary if anything is new.
  void FlushAtExit();

  // The path of this process's trace file.
  std::string Path();

 private:
  Recorder() = default;
  std::string PathLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PrintSummaryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::mutex mu_;
  std::vector<TraceEvent> events_ ABSL_GUARDED_BY(mu_);
  int rank_ ABSL_GUARDED_BY(mu_) = -1;  // of the first communicator
  int world_size_ ABSL_GUARDED_BY(mu_) = 1;
  int live_comms_ ABSL_GUARDED_BY(mu_) = 0;
  size_t written_ ABSL_GUARDED_BY(mu_) = 0;     // events_.size() at the last write
  size_t summarized_ ABSL_GUARDED_BY(mu_) = 0;  // events_.size() at the last summary
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;   // events past kMaxEvents
};

// The Chrome trace JSON document for `events` (exposed for tests).
std::string FormatChromeTrace(const std::vector<TraceEvent>& events, int rank,
                              int world_size);

}  // namespace syncline::plugin::trace

#endif  // SYNCLINE_PLUGINS_TRACE_RECORDER_H_
