// node_group.h: the syncline-run launchers of a multi-node job, in step.
//
// With --nnodes > 1 each node runs its own launcher. They share the job's
// store (hosted by node 0's launcher) and use it for two things:
//  - A failure anywhere ends the generation everywhere. The launcher whose
//    worker failed first publishes why (key syncline-run/gen<g>/failed);
//    the others poll for that key and stop their workers at once, instead of
//    waiting for each rank to notice a dead peer through an op timeout.
//  - A restart starts on every node together: each launcher checks in for
//    generation g+1 and waits until all nnodes have, so that no node's new
//    workers wait for peers that are still being stopped.
//  - Node 0 keeps the store up until every launcher has left, so that a
//    slower node's workers do not lose it while they finish.
// The keys sit under "syncline-run/", apart from the workers' own keys
// (which carry the SYNCLINE_STORE_PREFIX of their generation).
//
// Thread safety: used from the launcher's main thread only.
//
// Example:
//   SL_ASSIGN_OR_RETURN(auto group,
//                       NodeGroup::Join(addr, port, token, 1, 2, timeout));
//   group->ReportFailure(0, {.exit_status = 3, .reason = "rank 3 exited 3"});
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_NODE_GROUP_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_NODE_GROUP_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "signals.h"
#include "syncline/store.h"

namespace syncline::run {

// What a node reports about the failure that ended a generation.
struct NodeFailure {
  int node_rank = 0;
  int exit_status = 1;  // the root cause's status, for the other launchers
  std::string reason;   // e.g. "rank 3 (pid 812) exited 3 at +1.20s"
};

class NodeGroup {
 public:
  // Connects to the store at master_addr:port with the job's store token,
  // retrying for up to `connect_timeout` (node 0's launcher may start after
  // this one).
  static absl::StatusOr<std::unique_ptr<NodeGroup>> Join(const std::string& master_addr,
                                                         int port, const std::string& token,
                                                         int node_rank, int nnodes,
                                                         absl::Duration connect_timeout);

  // Publishes this node's failure of `generation`, unless another node's is
  // already there: the first report is the root cause, and is returned when
  // it is another node's. Best effort: an unreachable store is only logged.
  std::optional<NodeFailure> ReportFailure(int generation, const NodeFailure& failure);

  // Another node's failure of `generation`, if one was reported. Never
  // blocks on the key. An error means the store is unreachable (node 0's
  // launcher died): the caller should stop asking, and leave it to the
  // workers to notice the dead job.
  absl::StatusOr<std::optional<NodeFailure>> RemoteFailure(int generation);

  // Checks in for `generation` and waits until every node has. Fails after
  // `timeout`, naming how many nodes arrived, or when SIGINT/SIGTERM arrives
  // on `signals` (that signal is returned in *interrupt).
  absl::Status AwaitGeneration(int generation, absl::Duration timeout,
                               SignalPipe* signals, int* interrupt);

  // The job id every node's workers use. Node 0 publishes `own_id` (never
  // empty there) and returns it; another node returns its `own_id` when it
  // has one (a mismatch is then refused at the workers' check-in, naming
  // both jobs), and otherwise node 0's, waiting up to `timeout` for it.
  absl::StatusOr<std::string> ShareJobId(const std::string& own_id,
                                         absl::Duration timeout);

  // Says this node's launcher is about to exit, however its workers ended.
  void Leave();

  // Node 0 only, before it closes the store: waits until the other nodes
  // have left (or `timeout`, or a signal), so that no node's workers lose the
  // store while they still finish. After a success that means every node (a
  // node may not even have started yet if its workers need no rendezvous);
  // after a failure only those that joined: a node that never came would
  // only hold the job up.
  absl::Status AwaitOthersLeft(bool succeeded, absl::Duration timeout,
                               SignalPipe* signals, int* interrupt);

 private:
  // Polls until the counter at `key` reaches `target`; see AwaitGeneration
  // for the timeout and signals. `what` completes the timeout message.
  absl::Status AwaitCount(const std::string& key, int target, absl::Duration timeout,
                          SignalPipe* signals, int* interrupt, absl::string_view what);

  NodeGroup(std::shared_ptr<Store> store, int node_rank, int nnodes)
      : store_(std::move(store)), node_rank_(node_rank), nnodes_(nnodes) {}

  std::shared_ptr<Store> store_;
  int node_rank_;
  int nnodes_;
  bool warned_ = false;  // about an unreachable store, once
};

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_NODE_GROUP_H_
