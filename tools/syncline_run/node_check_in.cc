#include "node_check_in.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "output.h"
#include "syncline/rendezvous.h"
#include "syncline/tcp_store.h"
#include "worker_env.h"

namespace syncline::run {
namespace {

// How often a multi-node check-in asks whether another node failed.
constexpr int kGroupCheckMs = 200;

// Why the job cannot meet, when this node learns it before the verdict:
// a stop signal, or another node's failure (recorded in *result).
std::string ReasonToAbandon(const NodeCheckInConfig& c, bool signalled,
                            NodeCheckInResult* result) {
  if (signalled) {
    for (int signo : c.signals->Drain()) {
      if (signo == SIGINT || signo == SIGTERM) result->interrupt = signo;
    }
    if (result->interrupt != 0) {
      return absl::StrCat("node ", c.node_rank, "'s syncline-run was stopped (",
                          strsignal(result->interrupt), ") before its workers started");
    }
  }
  if (c.group == nullptr) return "";
  absl::StatusOr<std::optional<NodeFailure>> remote =
      c.group->RemoteFailure(c.generation);
  if (!remote.ok() || !remote->has_value()) return "";
  result->remote_failure = **remote;
  return absl::StrCat("node ", (*remote)->node_rank,
                      " failed before the job met: ", (*remote)->reason);
}

}  // namespace

NodeCheckInResult CheckInNode(const NodeCheckInConfig& c) {
  NodeCheckInResult result;
  TcpStoreClientOptions client{.host = c.master_addr,
                               .port = c.port,
                               .connect_timeout = c.timeout,
                               .token = c.token};
  // Two connections: the helper's blocks in the check-in, and this thread's
  // can still end it.
  absl::StatusOr<std::shared_ptr<Store>> waiting = ConnectTcpStore(client);
  absl::StatusOr<std::shared_ptr<Store>> control =
      waiting.ok() ? ConnectTcpStore(client) : waiting;
  int wake[2] = {-1, -1};
  if (!control.ok()) {
    result.status = control.status();
    return result;
  }
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    result.status = absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
    return result;
  }
  const std::string prefix = GenerationPrefix(c.generation);
  RendezvousInfo info;
  info.rank = c.node_rank * c.nproc_per_node;
  info.world_size = c.nnodes * c.nproc_per_node;
  info.check_in_ranks = c.nproc_per_node;
  info.master_addr = c.master_addr;
  info.master_port = c.port;
  info.store_hosted = true;
  info.store_prefix = prefix;
  info.job_id = c.job_id;
  info.job_id_source = c.job_id_source;
  std::shared_ptr<Store> store = MakePrefixStore(prefix, *waiting);
  std::thread helper([&] {
    result.status = RendezvousCheckIn(*store, info, c.timeout);
    char done = 1;
    (void)!::write(wake[1], &done, 1);
  });
  for (bool abandoned = false;;) {
    pollfd fds[2] = {{wake[0], POLLIN, 0},
                     {c.signals != nullptr ? c.signals->fd() : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, c.group != nullptr ? kGroupCheckMs : -1);
    if (n > 0 && (fds[0].revents & POLLIN)) break;
    if (abandoned) continue;
    std::string why = ReasonToAbandon(c, n > 0 && (fds[1].revents & POLLIN), &result);
    if (why.empty()) continue;
    abandoned = true;
    absl::Status published = AbandonRendezvousCheckIn(*MakePrefixStore(prefix, *control),
                                                      absl::AbortedError(why));
    if (!published.ok()) {
      Say(absl::StrCat("could not tell the other nodes that the job cannot meet: ",
                       published.message()));
    }
  }
  helper.join();
  ::close(wake[0]);
  ::close(wake[1]);
  // Another node may have ended the check-in for a failure this one has
  // not asked about yet.
  if (!result.status.ok() && !result.remote_failure && c.group != nullptr) {
    ReasonToAbandon(c, /*signalled=*/false, &result);
  }
  return result;
}

}  // namespace syncline::run
