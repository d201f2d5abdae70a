// flight_recorder.h: an always-on record of each communicator's recent ops.
//
// A ring buffer of the last N ops (SYNCLINE_FLIGHT_RECORDER_SIZE, default
// 1024): sequence number, op description, bytes, state, and the times it was
// posted and seen to finish. Recording costs one mutex and a struct copy per
// op. The buffer is dumped as JSON per rank on an op timeout, on SIGUSR1, and
// on demand (Communicator::DumpFlightRecorder()).
//
// Progress publication: a background thread owned by the recorder writes
// this rank's (last posted, last completed) sequence numbers, the op it is
// in and the time to its own key, progress/<rank>, every kPublishPeriod when
// they change, so that other ranks can read them without this rank's help
// (it may be stopped or hung). On a timeout of op #N, DesyncReport() answers
// at once (answer/<N>/<rank>), waits, bounded, for the other ranks' answers,
// and falls back to the last published progress of those that did not
// answer, saying how old it is. It says which ranks never joined op #N,
// which finished #N but never started #N+1, and, when ranks are in different
// ops at #N, each one's op (kind, dtype, count, reduction, root).
//
// Thread safety: all methods may be called from any thread.
#ifndef SYNCLINE_CORE_SRC_FLIGHT_RECORDER_H_
#define SYNCLINE_CORE_SRC_FLIGHT_RECORDER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "op_label.h"
#include "syncline/store.h"

namespace syncline::internal {

class FlightRecorder {
 public:
  enum class State { kPosted, kCompleted, kFailed };

  // `store` is the communicator's scoped store (may be null for size 1);
  // `backend` names the backend in every op's description.
  FlightRecorder(int rank, int size, uint64_t comm_id, std::shared_ptr<Store> store,
                 const std::string& backend);
  ~FlightRecorder();  // stops and joins the publisher thread

  // `what.seq` is the op's sequence number; the label is kept as it is
  // and put into words only when read (op_label.h).
  void Posted(const OpLabel& what, size_t bytes);
  void Finished(uint64_t seq, bool ok, absl::string_view error);

  // " on rank 1/4 over gloo", the end of every op's description; lives as
  // long as the recorder (an OpLabel's `where`).
  const std::string& where() const { return where_; }

  uint64_t last_posted() const;
  uint64_t last_completed() const;

  // The ring as JSON: {"rank":..,"comm":..,"ops":[{...}]}.
  std::string ToJson() const;

  // Writes ToJson() to $SYNCLINE_DEBUG_DIR (default /tmp; created if missing)
  // as syncline-flight-<job>-rank<r>-comm<id>.json, where <job> is the job
  // id (ResolveJobId(), unsafe characters as '_') or "pid<pid>" when
  // the job has no id. Logs at warning level where it went, or why it could
  // not be written (with errno's text); returns the path or "".
  std::string Dump() const;

  // Answers for this rank at once and builds the cross-rank report for a
  // timeout of op `seq`. Blocks until every rank has answered or `wait` has
  // passed; there is no fixed delay. With `only_if_another_answered` (a
  // peer error), waits only for ranks whose published progress shows them
  // inside op `seq`, and returns "" unless another rank has answered for
  // `seq`, i.e. gave up on this op itself: a peer that simply died needs no
  // report.
  std::string DesyncReport(uint64_t seq, absl::Duration wait,
                           bool only_if_another_answered = false);

  // How often the publisher looks for new progress to publish.
  static constexpr std::chrono::milliseconds kPublishPeriod{250};

 private:
  static constexpr int64_t kNotFinished = INT64_MIN;
  struct Entry {
    uint64_t seq = 0;
    OpLabel what;
    size_t bytes = 0;
    State state = State::kPosted;
    // Ticks of the recorder's clock (flight_recorder.cc), wall time when read.
    int64_t posted = 0;
    int64_t finished = kNotFinished;
    std::string error;
  };
  void PublishLoop();
  void Publish();
  // This rank's progress as published; the op described is `seq` if it is
  // in the ring, else the oldest collective still running (seq 0: the latter).
  std::string ProgressValue(uint64_t seq) const;

  const int rank_, size_;
  const uint64_t comm_id_;
  const std::string where_;
  const std::shared_ptr<Store> store_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> ring_;          // guarded by mu_
  size_t next_ = 0;                  // guarded by mu_
  uint64_t last_posted_ = 0;         // guarded by mu_
  uint64_t last_completed_ = 0;      // guarded by mu_
  uint64_t published_posted_ = 0, published_completed_ = 0;  // publisher only
  bool stop_ = false;                // guarded by mu_
  std::thread publisher_;            // owned; joined in the destructor
};

// Registers recorders for the SIGUSR1 dump (installed on first use).
void RegisterForSignalDump(FlightRecorder* recorder);
void UnregisterForSignalDump(FlightRecorder* recorder);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_FLIGHT_RECORDER_H_
