// summary.h: the failure summary syncline-run prints when workers fail.
//
// When one rank of a distributed job dies, the others usually fail soon
// after: a peer's socket closes, a collective times out, or the launcher
// stops them. Their errors are loud and come last, so a reader tends to blame
// the wrong rank. Yet exit times alone mislead too: the victim of a peer's
// failure often exits first, or within the same millisecond. The ROOT CAUSE
// is therefore the earliest rank whose error originated locally; a rank
// whose error blames a peer, or that the launcher stopped, is a CONSEQUENCE
// unless no rank failed on its own (see FindRootCause).
// Each carries its pid, how it ended, when (seconds since the generation
// started) and its last stderr lines.
//
// Example output:
//   syncline-run: worker failure in generation 0: rank 2 failed; 2
//                 other rank(s) of 4 failed because of it    (one line)
//   syncline-run: root cause: rank 2 (pid 1234) killed by SIGKILL at +0.42s
//   syncline-run:   last stderr lines of rank 2:
//   syncline-run:     | about to crash
//   syncline-run: consequences:
//   syncline-run:   rank 0 (pid 1232) exited 1 at +0.45s
//   syncline-run:     | allreduce #3: rank 2 closed the connection
//   syncline-run:   rank 1 (pid 1233) killed by SIGTERM at +0.46s (stopped
//                   by syncline-run)                     (one line)
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_SUMMARY_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_SUMMARY_H_

#include <sys/types.h>

#include <deque>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker.h"

namespace syncline::run {

// How one rank of a generation ended.
struct RankOutcome {
  int rank = 0;
  pid_t pid = 0;
  WorkerExit exit;
  // Whether the launcher had already signalled it to stop when it ended.
  bool stopped_by_launcher = false;
  std::deque<std::string> stderr_tail;
};

// Lines of stderr shown for the root cause and for each consequence.
inline constexpr size_t kRootCauseTailLines = 20;
inline constexpr size_t kConsequenceTailLines = 5;

// Whether a rank's last stderr lines say that its failure came from another
// rank: a peer died, closed or reset its connection, or did not answer in
// time (see kPeerFailurePhrases in summary.cc for the wordings matched).
bool BlamesAPeer(const std::deque<std::string>& stderr_tail);

// Index in `outcomes` of the root cause, among the failed ranks (non-zero
// exit or a signal): the earliest to exit of those whose failure originated
// locally. A rank whose error blames a peer (BlamesAPeer), or that the
// launcher's stop signal ended, is a consequence, chosen only when no rank
// failed locally; then the earliest of them. Exit order alone is not trusted:
// the victim of a peer's failure often exits first or in the same
// millisecond. The order of `outcomes` breaks ties, so pass them in the order
// they were reaped. -1 when no rank failed.
int FindRootCause(const std::vector<RankOutcome>& outcomes);

// The summary text (lines ending in '\n', each prefixed "syncline-run: ")
// for a generation that started at `start`. Empty when no rank failed and
// `remote_root_cause` is empty. A non-empty `remote_root_cause` (another
// node's report, see node_group.h) is the root cause, and every local
// failure is a consequence.
std::string FormatFailureSummary(int generation, absl::Time start,
                                 const std::vector<RankOutcome>& outcomes,
                                 const std::string& remote_root_cause = "");

// "rank 2 (pid 1234) killed by SIGKILL at +0.42s", as in the summary.
std::string DescribeOutcome(const RankOutcome& outcome, absl::Time start);

// The launcher's exit status for a failed run: the root cause's exit code,
// or 128 + its signal; never 0.
int FailureExitStatus(const std::vector<RankOutcome>& outcomes);

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_SUMMARY_H_
