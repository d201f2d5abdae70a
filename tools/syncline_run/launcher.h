// launcher.h: syncline-run's job, from options to exit status.
//
// The launcher hosts the rendezvous store (on node rank 0), starts the local
// workers as one Generation, and when a worker fails either restarts the
// whole generation (up to max_restarts times, torchrun's semantics) or
// reports the failure and exits with the root cause's status. The store
// server stays up across generations; each generation's workers use their
// own key prefix (SYNCLINE_STORE_PREFIX=gen<g>/), so that keys left by a
// dead generation cannot satisfy the next one's waits. With --nnodes > 1 the
// launchers of all nodes keep in step through that store (node_group.h): a
// failure on one node stops every node, and restarts begin together.
//
// Before each generation's workers start, the node's launcher checks in for
// its local ranks, once (node_check_in.h), and the workers, told so by
// SYNCLINE_NODE_CHECKED_IN=1, skip their own check-in: the store sees nodes,
// not ranks.
//
// Every worker gets the job's identity as SYNCLINE_JOB_ID, so that the
// rendezvous check-in refuses ranks of another job that reach the same
// store: --job-id, else the launcher's own SYNCLINE_JOB_ID,
// TORCHELASTIC_RUN_ID or Slurm/OpenMPI job id, else a random id that node 0
// draws and publishes to the other nodes' launchers.
//
// The store demands a token (SYNCLINE_STORE_TOKEN), which the workers get in
// their environment. On one node, when none is set, the launcher draws a
// random one (256 bits) per job, so no other process on the machine can
// join the job or read its keys. A multi-node job must set the same token on
// every node; without one the launcher refuses to start (exit status 2) and
// says how to make one.
//
// Exit status: 0 when every worker of the last generation exited 0; the root
// cause's exit code (or 128 + signal) after a failure; 128 + signal when the
// launcher itself was interrupted; 1 when the store cannot be hosted; 2 for
// bad options (or a multi-node job without a store token, or a malformed
// SYNCLINE_STORE_MAX_BYTES); 127 when the program cannot be started.
//
// Example:
//   LaunchOptions o;
//   o.nproc_per_node = 4;
//   o.command = {"./train", "--epochs=1"};
//   return RunLauncher(o);
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_LAUNCHER_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace syncline::run {

struct LaunchOptions {
  int nproc_per_node = 1;  // -n
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free one (node rank 0 only)
  int max_restarts = 0;
  absl::Duration grace_period = absl::Seconds(5);  // SIGTERM -> SIGKILL
  // --job-id / --rdzv-id; empty: ResolveJobId() of the launcher's environment,
  // else a random id from node 0 (see the file comment).
  std::string job_id;
  std::vector<std::string> command;                // the program and its arguments
};

// Checks the options for contradictions (e.g. a node rank out of range, or a
// port of 0 on a node that does not host the store). The message says which
// flag to fix.
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// Runs the job and returns the launcher's exit status (see the file comment).
// Blocks until every worker is gone. Call from the main thread, once.
int RunLauncher(const LaunchOptions& options);

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_LAUNCHER_H_
