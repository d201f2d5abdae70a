// launcher_test_util.h: helpers for tests that drive syncline-run.
//
// The tests run the real binaries through syncline::testing::RunCommand (a
// /bin/sh -c command line), mostly with tiny shell programs as workers, so
// that launcher behaviour is tested without depending on a backend.
//
// Example:
//   CommandResult r = RunCommand(absl::StrCat(
//       Launcher(), " -n 2 -- sh -c ", ShellQuote("echo $RANK")));
#ifndef SYNCLINE_TESTS_TOOLS_LAUNCHER_TEST_UTIL_H_
#define SYNCLINE_TESTS_TOOLS_LAUNCHER_TEST_UTIL_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace syncline::testing {

// Absolute paths of the built binaries.
std::string Launcher();
std::string AllreduceExample();

// Whether the gloo plugin was built (tests of real collectives need it).
bool GlooPluginBuilt();

// `s` single-quoted for /bin/sh.
std::string ShellQuote(absl::string_view s);

// A fresh folder under the gtest temp dir; the test owns it.
std::string MakeTempDir();

// Writes an executable /bin/sh script and returns its path.
std::string WriteScript(const std::string& dir, const std::string& name,
                        const std::string& body);

// Waits until `path` exists (a writer renames it into place when complete)
// and returns its contents; "" after `timeout`.
std::string WaitForFile(const std::string& path, absl::Duration timeout);

// A secret for multi-node tests, which syncline-run requires
// (SYNCLINE_STORE_TOKEN=...) as an environment assignment for a command line.
std::string TokenEnv();

// A /bin/sh script for a two-node job on this host. `node(rank, port)` is
// node `rank`'s command line, to be given `--master-port <port>`: node 0 gets
// "0", so its launcher binds a free port itself and reports it ("store at
// 127.0.0.1:P"); node 1 is started once that line is out, with "$port", which
// the script has set to P. Probing a free port and releasing it for the
// launcher would race with anything else binding it in between. The script
// prints node 0's output after node 1's, then "status=<node 0>,<node 1>".
std::string TwoNodeScript(
    const std::function<std::string(int rank, const std::string& port)>& node);

// The store port that node 0 reported in a TwoNodeScript's output; 0 if none.
int ReportedStorePort(absl::string_view output);

// Lines of `output` that start with `prefix`, with the prefix removed.
std::vector<std::string> LinesWithPrefix(absl::string_view output,
                                         absl::string_view prefix);

// Parses "NAME=value NAME2=value2" into a map.
std::map<std::string, std::string> ParseAssignments(absl::string_view line);

// CPUs this process may run on, counted independently of the launcher.
int AffinityCores();

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_TOOLS_LAUNCHER_TEST_UTIL_H_
