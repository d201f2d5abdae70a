// generation.h: one set of workers, from start until the last one is reaped.
//
// A generation starts every local worker, then runs a single poll loop that
//  - forwards each worker's output line by line with its rank prefix,
//  - reaps workers as soon as SIGCHLD arrives (within milliseconds),
//  - on the first failure (non-zero exit or a signal) sends SIGTERM to every
//    other worker's process group and SIGKILL after the grace period,
//  - forwards SIGINT/SIGTERM sent to the launcher to every worker; a second
//    one kills them at once,
//  - in a multi-node job, publishes its first failure to the other nodes'
//    launchers and stops its own workers when another node reports one.
// When the last worker is gone it reports how the generation ended, with the
// failure summary (see summary.h). Restarting is the caller's decision.
//
// Thread safety: Run() is called from the launcher's main thread only, the
// one whose signal mask lets SignalPipe's signals in.
//
// Example:
//   Generation::Config config{.index = 0, .specs = specs,
//                             .grace_period = absl::Seconds(5),
//                             .signals = signals.get()};
//   SL_ASSIGN_OR_RETURN(Generation::Result r, Generation::Run(config));
//   if (r.ending == Generation::Ending::kFailure) std::cerr << r.summary;
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_GENERATION_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_GENERATION_H_

#include <poll.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "node_group.h"
#include "output.h"
#include "signals.h"
#include "summary.h"
#include "worker.h"

namespace syncline::run {

class Generation {
 public:
  struct Config {
    int index = 0;                  // SYNCLINE_RESTART_COUNT of the workers
    std::vector<WorkerSpec> specs;  // one per local worker
    absl::Duration grace_period = absl::Seconds(5);
    SignalPipe* signals = nullptr;  // not owned
    // Multi-node jobs only (else null): where failures are published to and
    // learned from the other nodes' launchers. Not owned.
    NodeGroup* group = nullptr;
    int node_rank = 0;
  };

  enum class Ending {
    kSuccess,      // every worker exited 0
    kFailure,      // a worker failed; see summary
    kInterrupted,  // the launcher got SIGINT/SIGTERM and stopped the workers
  };

  struct Result {
    Ending ending = Ending::kSuccess;
    int exit_status = 0;                // what the launcher should exit with
    std::string summary;                // the failure summary, empty unless kFailure
    std::vector<RankOutcome> outcomes;  // in the order the workers ended
  };

  // Starts the workers and waits for all of them. An error means a worker
  // could not be started (the ones already started are stopped first).
  static absl::StatusOr<Result> Run(const Config& config);

 private:
  struct Worker {
    std::unique_ptr<WorkerProcess> process;
    std::unique_ptr<LineForwarder> out;
    std::unique_ptr<LineForwarder> err;
    bool stop_sent = false;  // the launcher signalled it to stop
  };

  explicit Generation(const Config& config) : config_(config) {}

  absl::Status SpawnAll();
  void Loop();
  void HandleSignals();
  // Stops this node's workers if another node reported a failure.
  void CheckOtherNodes();
  void ReapAll();
  void ForwardReady(const std::vector<pollfd>& fds,
                    const std::vector<std::pair<Worker*, int>>& owners);
  // Sends `signo` to every worker still running (and to what it started).
  void SignalAll(int signo);
  void BeginStop(int signo);
  // Forwards what `w`'s pipes hold now, without waiting for more.
  void DrainOutput(Worker& w);
  void DrainAndClose();
  bool AnyRunning() const;
  Result Finish();

  const Config& config_;
  absl::Time start_;
  std::vector<Worker> workers_;
  std::vector<int> reap_order_;  // indices into workers_
  bool stopping_ = false;
  bool killed_ = false;
  absl::Time kill_at_ = absl::InfiniteFuture();
  int interrupt_signal_ = 0;                   // SIGINT/SIGTERM the launcher received
  bool failed_ = false;                        // a worker here failed before any stop
  std::optional<NodeFailure> remote_failure_;  // ended by another node
  absl::Time next_group_check_ = absl::InfinitePast();
};

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_GENERATION_H_
