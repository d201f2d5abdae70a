#include "summary.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace syncline::run {
namespace {

constexpr absl::string_view kPrefix = "syncline-run: ";

// Two ranks reaped this close together may have died in either order: the
// launcher only learns of a death when it next wakes up.
constexpr absl::Duration kSameTime = absl::Milliseconds(10);

std::string Offset(absl::Time start, absl::Time t) {
  return absl::StrFormat("+%.2fs", absl::ToDoubleSeconds(t - start));
}

void AppendTail(const std::deque<std::string>& tail, size_t max_lines, std::string* out) {
  if (tail.empty()) {
    absl::StrAppend(out, kPrefix, "    (no stderr output)\n");
    return;
  }
  size_t skip = tail.size() > max_lines ? tail.size() - max_lines : 0;
  for (size_t i = skip; i < tail.size(); ++i) {
    absl::StrAppend(out, kPrefix, "    | ", tail[i], "\n");
  }
}

}  // namespace

std::string DescribeOutcome(const RankOutcome& o, absl::Time start) {
  std::string line = absl::StrCat("rank ", o.rank, " (pid ", o.pid, ") ",
                                  o.exit.Describe(), " at ", Offset(start, o.exit.time));
  if (o.stopped_by_launcher) absl::StrAppend(&line, " (stopped by syncline-run)");
  return line;
}

namespace {

// Lower-case phrases by which an error says that it came from another rank.
// Syncline's messages have no single marker for this, so these are the
// wordings its backends and store client use when a peer died, closed its
// end or never answered (backends/gloo/communicator.cc "connection to a peer
// failed", backends/ucx/advance.cc "peer rank N died", backends/nccl
// "rank N aborted first", core/src/tcp_store_client.cc "the store closed the
// connection", the store's and backends' "timed out"), plus the system's own
// ("Connection reset by peer", "Broken pipe"). Keep it short and specific: a
// phrase that a local error could contain would hide the real root cause.
constexpr absl::string_view kPeerFailurePhrases[] = {
    "peer failed",          "peer died",          "peer rank",
    "a peer is missing",    "connection to a peer", "closed the connection",
    "connection reset",     "connection refused", "broken pipe",
    "aborted first",        "aborted its communicator too", "timed out",
};

// How likely a failed rank is a consequence of another's failure, from 0
// (its failure originated here) to 3 (the launcher ended it); the root cause
// is the earliest of the lowest tier.
//   0: it ended on its own and its error does not blame a peer.
//   1: the launcher had asked it to stop, but it exited with a code of its own
//      after an error that does not blame a peer: it had failed locally (a
//      full disk) and was still winding down when a faster victim's exit
//      made the launcher stop everyone.
//   2: its error blames a peer.
//   3: the launcher's signal ended it, or it left no error to judge by.
int ConsequenceTier(const RankOutcome& o) {
  const bool blames_peer = BlamesAPeer(o.stderr_tail);
  if (!o.stopped_by_launcher) return blames_peer ? 2 : 0;
  if (o.exit.signal == 0 && !o.stderr_tail.empty() && !blames_peer) return 1;
  return 3;
}

}  // namespace

bool BlamesAPeer(const std::deque<std::string>& stderr_tail) {
  for (const std::string& line : stderr_tail) {
    const std::string lower = absl::AsciiStrToLower(line);
    for (absl::string_view phrase : kPeerFailurePhrases) {
      if (absl::StrContains(lower, phrase)) return true;
    }
  }
  return false;
}

int FindRootCause(const std::vector<RankOutcome>& outcomes) {
  int root = -1;
  int root_tier = 0;
  for (int i = 0; i < static_cast<int>(outcomes.size()); ++i) {
    const RankOutcome& o = outcomes[i];
    if (o.exit.ok()) continue;
    // Exit times cannot order two ranks that died within the launcher's
    // wake-up interval, and the victim of a peer's failure often dies first
    // (its socket closed). What a rank's error says is the better evidence.
    const int tier = ConsequenceTier(o);
    if (root >= 0 && !(tier < root_tier ||
                       (tier == root_tier && o.exit.time < outcomes[root].exit.time))) {
      continue;
    }
    root = i;
    root_tier = tier;
  }
  return root;
}

std::string FormatFailureSummary(int generation, absl::Time start,
                                 const std::vector<RankOutcome>& outcomes,
                                 const std::string& remote_root_cause) {
  const bool remote = !remote_root_cause.empty();
  int root = remote ? -1 : FindRootCause(outcomes);
  if (!remote && root < 0) return "";
  std::vector<const RankOutcome*> consequences;
  for (int i = 0; i < static_cast<int>(outcomes.size()); ++i) {
    if (i != root && !outcomes[i].exit.ok()) consequences.push_back(&outcomes[i]);
  }
  std::stable_sort(consequences.begin(), consequences.end(),
                   [](const RankOutcome* a, const RankOutcome* b) {
                     return a->exit.time < b->exit.time;
                   });

  std::string out;
  absl::StrAppend(&out, kPrefix, "worker failure in generation ", generation);
  if (remote) {
    absl::StrAppend(&out, " on another node; ", consequences.size(), " of ",
                    outcomes.size(), " rank(s) here failed after it\n");
    absl::StrAppend(&out, kPrefix, "root cause: ", remote_root_cause, "\n");
  } else {
    const RankOutcome& r = outcomes[root];
    absl::StrAppend(&out, ": rank ", r.rank, " failed");
    if (!consequences.empty()) {
      absl::StrAppend(&out, "; ", consequences.size(), " other rank(s) of ",
                      outcomes.size(), " failed because of it");
    }
    out += "\n";
    absl::StrAppend(&out, kPrefix, "root cause: ", DescribeOutcome(r, start), "\n");
    absl::StrAppend(&out, kPrefix, "  last stderr lines of rank ", r.rank, ":\n");
    AppendTail(r.stderr_tail, kRootCauseTailLines, &out);
  }
  if (consequences.empty()) return out;

  absl::StrAppend(&out, kPrefix, "consequences:\n");
  for (const RankOutcome* c : consequences) {
    std::string note;
    if (root >= 0 && !c->stopped_by_launcher &&
        absl::AbsDuration(c->exit.time - outcomes[root].exit.time) < kSameTime) {
      note = " (within 10 ms of the root cause: the order may be uncertain)";
    }
    absl::StrAppend(&out, kPrefix, "  ", DescribeOutcome(*c, start), note, "\n");
    if (!c->stderr_tail.empty()) {
      AppendTail(c->stderr_tail, kConsequenceTailLines, &out);
    }
  }
  return out;
}

int FailureExitStatus(const std::vector<RankOutcome>& outcomes) {
  int root = FindRootCause(outcomes);
  if (root < 0) return 1;
  int status = outcomes[root].exit.ShellStatus();
  return status != 0 ? status : 1;
}

}  // namespace syncline::run
