#include "node_group.h"

#include <poll.h>
#include <signal.h>

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "output.h"
#include "syncline/tcp_store.h"
#include "worker.h"

namespace syncline::run {
namespace {

constexpr absl::Duration kStoreTimeout = absl::Seconds(5);
constexpr char kJoinedKey[] = "syncline-run/joined";
constexpr char kLeftKey[] = "syncline-run/left";
constexpr char kJobIdKey[] = "syncline-run/job-id";
constexpr int kPollMs = 100;

std::string Key(int generation, absl::string_view what) {
  return absl::StrCat("syncline-run/gen", generation, "/", what);
}

// A failure travels as "<node>\n<exit status>\n<reason>".
std::string Encode(const NodeFailure& f) {
  return absl::StrCat(f.node_rank, "\n", f.exit_status, "\n", f.reason);
}

std::optional<NodeFailure> Decode(absl::string_view value) {
  std::vector<absl::string_view> parts = absl::StrSplit(value, absl::MaxSplits('\n', 2));
  NodeFailure f;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &f.node_rank) ||
      !absl::SimpleAtoi(parts[1], &f.exit_status)) {
    return std::nullopt;
  }
  f.reason = std::string(parts[2]);
  return f;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeGroup>> NodeGroup::Join(
    const std::string& master_addr, int port, const std::string& token, int node_rank,
    int nnodes, absl::Duration connect_timeout) {
  TcpStoreClientOptions options;
  options.host = master_addr;
  options.port = port;
  options.token = token;
  options.connect_timeout = connect_timeout;
  absl::StatusOr<std::shared_ptr<Store>> store = ConnectTcpStore(options);
  if (!store.ok()) return store.status();
  // Counted so that node 0 waits at the end only for nodes that came.
  absl::StatusOr<int64_t> joined = (*store)->Add(kJoinedKey, 1);
  if (!joined.ok()) return joined.status();
  return std::unique_ptr<NodeGroup>(
      new NodeGroup(std::move(store).value(), node_rank, nnodes));
}

std::optional<NodeFailure> NodeGroup::ReportFailure(int generation,
                                                    const NodeFailure& failure) {
  // CompareSet with an empty `expected` writes only if the key is absent, so
  // the first node to fail stays the root cause.
  absl::StatusOr<std::string> result =
      store_->CompareSet(Key(generation, "failed"), "", Encode(failure));
  if (!result.ok()) {
    if (!warned_) {
      warned_ = true;
      Say(absl::StrCat("could not tell the other nodes about the failure: ",
                       result.status().message()));
    }
    return std::nullopt;
  }
  std::optional<NodeFailure> first = Decode(*result);
  if (!first || first->node_rank == node_rank_) return std::nullopt;
  return first;
}

absl::StatusOr<std::optional<NodeFailure>> NodeGroup::RemoteFailure(int generation) {
  std::string key = Key(generation, "failed");
  absl::StatusOr<std::vector<bool>> present = store_->Check({key});
  if (!present.ok()) return present.status();
  if (present->empty() || !(*present)[0]) return std::nullopt;
  absl::StatusOr<std::string> value = store_->Get(key, kStoreTimeout);
  if (!value.ok()) return value.status();
  std::optional<NodeFailure> failure = Decode(*value);
  if (!failure || failure->node_rank == node_rank_) return std::nullopt;
  return failure;
}

absl::Status NodeGroup::AwaitGeneration(int generation, absl::Duration timeout,
                                        SignalPipe* signals, int* interrupt) {
  std::string key = Key(generation, "arrived");
  absl::StatusOr<int64_t> arrived = store_->Add(key, 1);
  if (!arrived.ok()) return arrived.status();
  return AwaitCount(
      key, nnodes_, timeout, signals, interrupt,
      absl::StrCat("ready to restart (generation ", generation,
                   "); a node whose workers succeeded or whose launcher died "
                   "will not come back"));
}

absl::StatusOr<std::string> NodeGroup::ShareJobId(const std::string& own_id,
                                                  absl::Duration timeout) {
  if (node_rank_ == 0) {
    if (absl::Status s = store_->Set(kJobIdKey, own_id); !s.ok()) return s;
    return own_id;
  }
  if (!own_id.empty()) return own_id;
  absl::StatusOr<std::string> id = store_->Get(kJobIdKey, timeout);
  if (!id.ok()) {
    return absl::Status(id.status().code(),
                        absl::StrCat("node 0 did not publish the job id (",
                                     id.status().message(), ")"));
  }
  return id;
}

void NodeGroup::Leave() {
  absl::StatusOr<int64_t> left = store_->Add(kLeftKey, 1);
  (void)left;  // node 0 gone already: nobody is waiting for us
}

absl::Status NodeGroup::AwaitOthersLeft(bool succeeded, absl::Duration timeout,
                                        SignalPipe* signals, int* interrupt) {
  absl::StatusOr<int64_t> joined = store_->Add(kJoinedKey, 0);
  if (!joined.ok()) return joined.status();
  absl::StatusOr<int64_t> left = store_->Add(kLeftKey, 0);
  if (!left.ok()) return left.status();
  int target = succeeded ? nnodes_ : static_cast<int>(*joined);
  if (*left >= target) return absl::OkStatus();
  Say(absl::StrCat("waiting up to ", absl::FormatDuration(timeout), " for ",
                   target - *left, " other node(s) to finish before closing the store"));
  return AwaitCount(kLeftKey, target, timeout, signals, interrupt,
                    "finished; closing the store anyway");
}

absl::Status NodeGroup::AwaitCount(const std::string& key, int target,
                                   absl::Duration timeout, SignalPipe* signals,
                                   int* interrupt, absl::string_view what) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    // Add(0) reads the counter without a blocking Get.
    absl::StatusOr<int64_t> count = store_->Add(key, 0);
    if (!count.ok()) return count.status();
    if (*count >= target) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("only ", *count, " of ", target, " nodes ", what, " (waited ",
                       absl::FormatDuration(timeout), ")"));
    }
    // Sleep on the signal pipe, so that Ctrl-C is not ignored meanwhile.
    pollfd p{signals->fd(), POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0) continue;
    for (int signo : signals->Drain()) {
      if (signo == SIGINT || signo == SIGTERM) {
        *interrupt = signo;
        return absl::CancelledError(absl::StrCat("interrupted by ", SignalName(signo)));
      }
    }
  }
}

}  // namespace syncline::run
