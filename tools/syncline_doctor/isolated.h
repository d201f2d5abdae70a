// isolated.h: probes that load foreign libraries, run in a child process.
//
// Loading a backend or libtorch runs those libraries' constructors in the
// loading process, and their destructors when it exits. A constructor can
// hang (a driver that never answers) or crash, and a destructor can hang at
// exit (a thread pool joined while its threads still start). The doctor must
// report such a library, not turn into its victim: RunIsolated runs the probes
// in order in a child process, which leaves with _exit (no destructors), and
// gives each probe `per_probe` to answer. A probe that hangs or kills the
// child is reported as such, and the rest go on in a new child.
//
// Example:
//   std::vector<IsolatedProbe> probes = {
//       {"gloo", [] { return std::vector<std::string>{ProbeBackend("gloo").detail}; }}};
//   for (const IsolatedResult& r : RunIsolated(probes, absl::Seconds(20))) ...
#ifndef SYNCLINE_TOOLS_SYNCLINE_DOCTOR_ISOLATED_H_
#define SYNCLINE_TOOLS_SYNCLINE_DOCTOR_ISOLATED_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace syncline::doctor {

struct IsolatedProbe {
  std::string name;  // for messages
  // Runs in the child; its fields come back to the parent as they are.
  std::function<std::vector<std::string>()> run;
};

struct IsolatedResult {
  enum class Outcome { kAnswered, kHung, kCrashed };
  Outcome outcome = Outcome::kAnswered;
  std::vector<std::string> fields;  // kAnswered: what run() returned
  // Otherwise what happened, to follow "loading it": "did not finish within
  // 20s", "killed the process that ran it (signal 11 (Segmentation fault))".
  std::string why;
};

// Returns one result per probe, in order, within about
// probes.size() * per_probe in the worst case. Call it before this process
// starts threads (it forks).
std::vector<IsolatedResult> RunIsolated(const std::vector<IsolatedProbe>& probes,
                                        absl::Duration per_probe);

}  // namespace syncline::doctor

#endif  // SYNCLINE_TOOLS_SYNCLINE_DOCTOR_ISOLATED_H_
