// plugin_test_util.h: small helpers shared by the interposer tests.
//
// Every multi-process test runs over gloo, with the plugins under test named
// in SYNCLINE_PLUGINS through RunOptions::env (the plugins are found in the
// build's lib/ folder, where SYNCLINE_PLUGIN_PATH points).
#ifndef SYNCLINE_TESTS_PLUGINS_PLUGIN_TEST_UTIL_H_
#define SYNCLINE_TESTS_PLUGINS_PLUGIN_TEST_UTIL_H_

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {

// The environment of a plugin test: gloo, the given plugins, a short op
// timeout (SYNCLINE_TIMEOUT, seconds), and `extra`.
inline RunOptions PluginRun(const std::string& plugins, int timeout_s,
                            std::map<std::string, std::string> extra = {}) {
  RunOptions run;
  run.timeout = absl::Seconds(90);
  run.env = std::move(extra);
  run.env["SYNCLINE_BACKEND"] = "gloo";
  run.env["SYNCLINE_PLUGINS"] = plugins;
  run.env["SYNCLINE_TIMEOUT"] = std::to_string(timeout_s);
  return run;
}

// Creates the communicator from the environment; fails the test if it can't.
inline std::unique_ptr<Communicator> Connect() {
  auto comm = Communicator::Create({});
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

// Posts with `post` and waits; returns the status, and the time taken.
template <typename PostFn>
absl::Status PostAndWait(PostFn post, absl::Duration* took) {
  const absl::Time start = absl::Now();
  auto work = post();
  absl::Status status = work.ok() ? (*work)->Wait(absl::Seconds(60)) : work.status();
  *took = absl::Now() - start;
  return status;
}

// Prints a line into the rank's output (shown when an assertion fails).
inline void Note(int rank, const std::string& what, const absl::Status& status,
                 absl::Duration took) {
  std::printf("rank %d: %s took %s: %s\n", rank, what.c_str(),
              absl::FormatDuration(took).c_str(), status.ToString().c_str());
  std::fflush(stdout);
}

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_PLUGINS_PLUGIN_TEST_UTIL_H_
