#include "summary.h"

#include <algorithm>

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

int FindRootCause(const std::vector<RankOutcome>& outcomes) {
  int root = -1;
  for (int i = 0; i < static_cast<int>(outcomes.size()); ++i) {
    const RankOutcome& o = outcomes[i];
    if (o.exit.ok()) continue;
    // A rank the launcher stopped is never the cause when another failed on
    // its own: its failure was ordered by us.
    if (root >= 0) {
      const RankOutcome& r = outcomes[root];
      bool better =
          (!o.stopped_by_launcher && r.stopped_by_launcher) ||
          (o.stopped_by_launcher == r.stopped_by_launcher && o.exit.time < r.exit.time);
      if (!better) continue;
    }
    root = i;
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
      absl::StrAppend(&out, " first; ", consequences.size(), " other rank(s) of ",
                      outcomes.size(), " failed after it");
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
        c->exit.time - outcomes[root].exit.time < kSameTime) {
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
