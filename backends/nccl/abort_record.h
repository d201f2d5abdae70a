// abort_record.h: how one rank's abort reaches every rank of a communicator,
// through the store the core hands to comm_create.
//
// NCCL alone does not guarantee that the other ranks learn of an abort: a
// peer that is not exchanging data with the aborted rank (or is between
// ops) only fails at its own op deadline. So the rank whose watchdog breaks
// the communicator (an op past its deadline, an NCCL error) publishes an
// AbortRecord under the communicator's store prefix, and every rank polls
// for it and breaks its own communicator at once, naming the rank that
// failed first and why.
//
// Keys (already scoped to the communicator by the core):
//   nccl/abort/count   a counter; each publishing rank adds 1. The rank
//                      that takes it from 0 to 1 is "first" and is the only
//                      one that writes the record, so concurrent failures
//                      cannot overwrite each other's story.
//   nccl/abort/record  the first rank's AbortRecord (AbortRecord::Encode).
// Polling costs one `add(count, 0)` round trip per period (no value is
// transferred, nothing is parked on the store server); only once the count
// is non-zero does a rank `get` the record. With the default period of
// 250 ms a 1,000-rank job adds 4,000 small requests a second to the store.
//
// Nothing here touches CUDA or NCCL, so it is tested without a GPU across
// real processes over the core's TCP store (tests/backends/nccl).
//
// Threading: Publish() and Poll() may be called from any thread (the
// store's calls are thread-safe). Watch() starts one thread, owned by the
// channel and joined by Stop() or the destructor; `on_abort` runs on it.
#ifndef SYNCLINE_BACKENDS_NCCL_ABORT_RECORD_H_
#define SYNCLINE_BACKENDS_NCCL_ABORT_RECORD_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "syncline/plugin_abi.h"

namespace syncline::nccl_backend {

// AbortRecord
//
// Who aborted a communicator first and why. `op` is the op kind ("allreduce")
// and `seq` its sequence number, or "" and 0 when no op is to blame (an
// asynchronous NCCL error with nothing in flight).
struct AbortRecord {
  int rank = -1;  // -1: unknown (the record could not be read)
  std::string op;
  uint64_t seq = 0;
  std::string reason;

  // "v1 <rank> <op or -> <seq> <reason>": the reason last, as is.
  std::string Encode() const;
  // False for text Encode() did not produce.
  static bool Decode(const std::string& text, AbortRecord* out);
  // "rank 2 aborted first, at allreduce #17: <reason>".
  std::string Describe() const;
};

struct AbortChannelOptions {
  // How often Watch() polls the store.
  std::chrono::milliseconds poll_period{250};
  // How long to wait for the record once the count says it exists (the
  // first rank writes it right after taking the count).
  std::chrono::milliseconds record_timeout{5000};
};

// AbortChannel
//
// The publish and poll ends of the protocol above, over one communicator's
// store. The store must outlive the channel (the ABI keeps it valid until
// comm_destroy, and the communicator destroys the channel first).
//
// Example:
//   AbortChannel channel(config.store, config.rank, {});
//   channel.Watch([&](const AbortRecord& first) { Break(first.Describe()); });
//   ...on a local failure:
//   AbortRecord first;
//   channel.Publish({rank, "allreduce", 17, "timed out"}, &first, &error);
class AbortChannel {
 public:
  AbortChannel(const sl_store_t* store, int rank, AbortChannelOptions options);
  ~AbortChannel();  // Stop()
  AbortChannel(const AbortChannel&) = delete;
  AbortChannel& operator=(const AbortChannel&) = delete;

  // Publish()
  //
  // Announces this rank's abort. If this rank is the first, writes `record`
  // and returns it in `first`; otherwise reads the first rank's record into
  // `first` (rank -1 if it cannot be read). Blocks for store round trips (at
  // most record_timeout for the record). Returns false, with `error`, if the
  // store failed so that the other ranks were not told; true otherwise.
  // Publishing stops this channel's Watch() (the local abort is already
  // under way).
  bool Publish(const AbortRecord& record, AbortRecord* first, std::string* error);

  // Poll()
  //
  // One check: true with the first rank's record once any rank published.
  // False when none has, or (with `error` set) when the store failed.
  bool Poll(AbortRecord* first, std::string* error);

  // Watch()
  //
  // Starts the watching thread: it calls Poll() every poll_period and, when
  // a record appears, calls `on_abort(record)` once and ends. A store
  // failure is reported once on stderr and polling goes on. Call once.
  void Watch(std::function<void(const AbortRecord&)> on_abort);

  // Stop(): ends the watching thread and joins it (waiting for a poll in
  // progress). The channel's thread touches the store no more once it
  // returns. Idempotent.
  void Stop();

 private:
  void WatchLoop(const std::function<void(const AbortRecord&)>& on_abort);
  bool ReadRecord(AbortRecord* first, std::string* error);

  const sl_store_t* const store_;
  const int rank_;
  const AbortChannelOptions options_;

  std::atomic<bool> published_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watcher_;
};

}  // namespace syncline::nccl_backend

#endif  // SYNCLINE_BACKENDS_NCCL_ABORT_RECORD_H_
