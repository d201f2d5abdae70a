// node_check_in.h: syncline-run checks its node's ranks in, once per node.
//
// At cluster scale the store should see nodes, not ranks. So before it starts
// a generation's workers, each node's launcher checks in for its local ranks
// [node_rank * n, node_rank * n + n) with one RendezvousCheckIn
// (RendezvousInfo::check_in_ranks = n): rank 0's record tells whether the
// store serves this job (a launcher of another job is refused, and starts
// nothing), each rank's key is claimed in the launcher's name, and one
// arrival counts all n. The workers start only once the job has met, and are
// told so (SYNCLINE_NODE_CHECKED_IN=1): their ConnectRendezvousStore connects
// and returns without a check-in of their own. A job of M nodes of n ranks
// thus costs the store M check-ins of 4 + n requests and M parked waits,
// instead of M * n check-ins of about 5 requests and M * n waits.
//
// The check-in blocks on the store, so it runs on a helper thread that
// CheckInNode() starts and joins, while the calling thread watches for
// SIGINT/SIGTERM and, in a multi-node job, for another node's failure.
// Either ends the check-in at once on every node, by publishing why as the
// job's verdict (AbandonRendezvousCheckIn).
//
// Thread safety: call CheckInNode() from the launcher's main thread only.
//
// Example:
//   NodeCheckInResult met = CheckInNode(config);
//   if (met.status.ok()) { /* start the workers */ }
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_NODE_CHECK_IN_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_NODE_CHECK_IN_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "node_group.h"
#include "signals.h"

namespace syncline::run {

struct NodeCheckInConfig {
  std::string master_addr;
  int port = 0;
  std::string token;  // the store's SYNCLINE_STORE_TOKEN
  int generation = 0;
  int node_rank = 0;
  int nproc_per_node = 1;
  int nnodes = 1;
  std::string job_id;
  std::string job_id_source;
  absl::Duration timeout = absl::Seconds(300);  // SYNCLINE_TIMEOUT
  SignalPipe* signals = nullptr;                // not owned
  NodeGroup* group = nullptr;                   // not owned; null on one node
};

struct NodeCheckInResult {
  absl::Status status;  // the job's verdict, the same on every node
  int interrupt = 0;    // SIGINT/SIGTERM that ended it, if any
  // Another node's failure, when one was reported meanwhile.
  std::optional<NodeFailure> remote_failure;
};

// Checks this node's ranks in for `config.generation` and returns once the
// job has met, or why it cannot (see the file comment). Blocks.
NodeCheckInResult CheckInNode(const NodeCheckInConfig& config);

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_NODE_CHECK_IN_H_
