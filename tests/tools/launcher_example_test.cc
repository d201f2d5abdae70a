// End-to-end tests: syncline-run starting syncline-allreduce-example over the
// gloo backend. The example checks its own result against the closed form
// size * (size + 1) / 2; these tests check what each rank reported, and that
// a rank killed in the middle of collectives is blamed, not its victims.
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher_test_util.h"
#include "syncline/tcp_store.h"

namespace syncline::testing {
namespace {

using ::testing::HasSubstr;

// SYNCLINE_TIMEOUT bounds every op; the tests expect failures to surface far
// sooner, through the launcher, not through that deadline.
constexpr int kOpTimeoutSeconds = 60;

std::string GlooEnv() {
  return absl::StrCat("OMP_NUM_THREADS=1 SYNCLINE_BACKEND=gloo SYNCLINE_TIMEOUT=",
                      kOpTimeoutSeconds, " ");
}

// Skips the test when there is no gloo plugin to load.
#define SKIP_WITHOUT_GLOO()                                              \
  do {                                                                   \
    if (!GlooPluginBuilt()) {                                            \
      GTEST_SKIP() << "the gloo plugin was not built (" << BuildLibDir() \
                   << "/libsyncline-backend-gloo.so is missing)";        \
    }                                                                    \
  } while (0)

TEST(LauncherExampleTest, FourRanksAllreduceOverGloo) {
  SKIP_WITHOUT_GLOO();
  CommandResult r =
      RunCommand(absl::StrCat(GlooEnv(), Launcher(), " -n 4 -- ", AllreduceExample()),
                 absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("[rank ", rank, "] rank ", rank,
                                                 "/4: allreduce over gloo of 1048576 "
                                                 "floats: OK (each element = 10)")));
  }
}

// Two "nodes" on one host: the store is on loopback, so every rank shares
// this host and loopback is the right interface (socket_iface.h).
TEST(LauncherExampleTest, TwoNodesOfTwoRanksAllreduceOverGloo) {
  SKIP_WITHOUT_GLOO();
  CommandResult r = RunCommand(TwoNodeScript([&](int rank, const std::string& port) {
                                 return absl::StrCat(
                                     GlooEnv(), TokenEnv(), "SYNCLINE_SOCKET_IFNAME=lo ",
                                     Launcher(), " -n 2 --nnodes 2 --node-rank ", rank,
                                     " --master-port ", port, " -- ", AllreduceExample(),
                                     " --count 4096");
                               }),
                               absl::Seconds(120));
  EXPECT_THAT(r.output, HasSubstr("status=0,0"));
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.output,
                HasSubstr(absl::StrCat("[rank ", rank, "] rank ", rank,
                                       "/4: allreduce over gloo of 4096 floats: OK "
                                       "(each element = 10)")));
  }
}

TEST(LauncherExampleTest, StoreRefusesClientsWithoutTheJobsToken) {
  SKIP_WITHOUT_GLOO();
  // Rank 0 publishes the store's port, then both ranks hold still until the
  // test has tried the store, and only then rendezvous and allreduce.
  std::string dir = MakeTempDir();
  std::string worker = absl::StrCat(
      "if [ \"$RANK\" = 0 ]; then echo \"$MASTER_PORT\" > ", dir, "/port.tmp && mv ", dir,
      "/port.tmp ", dir, "/port; fi; while [ ! -e ", dir, "/go ]; do sleep 0.05; done; exec ",
      AllreduceExample(), " --count 4096");
  for (const char* token_env : {"env -u SYNCLINE_STORE_TOKEN ", "SYNCLINE_STORE_TOKEN=s3cret "}) {
    SCOPED_TRACE(token_env);
    ::unlink((dir + "/port").c_str());
    ::unlink((dir + "/go").c_str());
    CommandResult r;
    std::thread job([&] {
      r = RunCommand(absl::StrCat(GlooEnv(), token_env, Launcher(), " -n 2 -- sh -c ",
                                  ShellQuote(worker)),
                     absl::Seconds(120));
    });
    int port = 0;
    std::string port_text = WaitForFile(dir + "/port", absl::Seconds(60));
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(port_text), &port))
        << "rank 0 did not publish the port: '" << port_text << "'";
    if (port > 0) {
      for (const char* presented : {"", "wrong"}) {
        absl::StatusOr<std::shared_ptr<Store>> intruder = ConnectTcpStore(
            {.host = "127.0.0.1", .port = port, .connect_timeout = absl::Seconds(10),
             .token = presented});
        if (intruder.ok()) {
          absl::StatusOr<int64_t> keys = (*intruder)->NumKeys();
          ADD_FAILURE() << "a client with token '" << presented
                        << "' was served by the job's store (NumKeys: "
                        << (keys.ok() ? std::to_string(*keys) : keys.status().ToString())
                        << ")";
        } else {
          EXPECT_THAT(intruder.status().message(),
                      HasSubstr("refused this client's token"));
        }
      }
    }
    // Always let the workers go, or the job would run into its deadline.
    std::ofstream(dir + "/go") << "go\n";
    job.join();
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_THAT(r.output, HasSubstr(absl::StrCat("[rank ", rank, "] rank ", rank,
                                                   "/2: allreduce over gloo of 4096 "
                                                   "floats: OK (each element = 3)")));
    }
  }
}

TEST(LauncherExampleTest, LaunchersOfAnotherJobOnTheSamePortAreRefused) {
  SKIP_WITHOUT_GLOO();
  // Node 1's launcher belongs to another job but reaches node 0's store (the
  // same port and token): its ranks must be refused at check-in, naming both
  // jobs, and both launchers must end with a failure instead of a hang.
  CommandResult r = RunCommand(TwoNodeScript([&](int rank, const std::string& port) {
                                 return absl::StrCat(
                                     GlooEnv(), TokenEnv(), "SYNCLINE_SOCKET_IFNAME=lo ",
                                     Launcher(), " -n 2 --nnodes 2 --node-rank ", rank,
                                     " --master-port ", port, " --job-id ",
                                     rank == 0 ? "job-a" : "job-b", " -- ", AllreduceExample(),
                                     " --count 4096");
                               }),
                               absl::Seconds(120));
  EXPECT_THAT(r.output, HasSubstr("status="));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("status=0,")));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr(",0\n")));
  EXPECT_THAT(r.output, HasSubstr("refused this process"));
  EXPECT_THAT(r.output, HasSubstr("job 'job-b'"));
  EXPECT_THAT(r.output, HasSubstr("job 'job-a'"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("allreduce over gloo of 4096 floats: OK")));
  EXPECT_LT(r.seconds, kOpTimeoutSeconds) << r.output;
}

TEST(LauncherExampleTest, RankKilledDuringCollectivesIsTheRootCause) {
  SKIP_WITHOUT_GLOO();
  // Every rank loops over allreduces far longer than the test; rank 2 is
  // SIGKILLed (its own pid, after exec) two seconds in, while the others
  // block in a collective waiting for it.
  std::string worker =
      absl::StrCat("if [ \"$RANK\" = 2 ]; then (sleep 2; kill -9 $$) & fi; exec ",
                   AllreduceExample(), " --count 1024 --iters 1000000000");
  CommandResult r = RunCommand(
      absl::StrCat(GlooEnv(), Launcher(), " -n 4 -- sh -c ", ShellQuote(worker)),
      absl::Seconds(120));
  EXPECT_EQ(r.exit_code, 128 + 9) << r.output;
  EXPECT_LT(r.seconds, kOpTimeoutSeconds / 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("root cause: rank 2 (pid "));
  EXPECT_THAT(r.output, HasSubstr(") killed by SIGKILL at +"));
  size_t consequences = r.output.find("consequences:");
  ASSERT_NE(consequences, std::string::npos) << r.output;
  for (int rank : {0, 1, 3}) {
    EXPECT_NE(r.output.find(absl::StrCat("rank ", rank, " (pid "), consequences),
              std::string::npos)
        << "rank " << rank << " not listed as a consequence:\n"
        << r.output;
  }
}

TEST(LauncherExampleTest, UnknownBackendFailsFastWithTheLoadersMessage) {
  // Alone (rank 0 of 1): the core's error names where it looked and what it
  // found, and nothing waits for a timeout.
  CommandResult alone =
      RunCommand(absl::StrCat("env -u RANK -u WORLD_SIZE SYNCLINE_BACKEND=nosuch ",
                              AllreduceExample(), " --count 16"),
                 absl::Seconds(30));
  EXPECT_NE(alone.exit_code, 0) << alone.output;
  EXPECT_LT(alone.seconds, 2.0) << alone.output;
  // The paths it tried, and the backends that are there instead.
  EXPECT_THAT(alone.output, HasSubstr("/libsyncline-backend-nosuch.so"));
  if (GlooPluginBuilt()) {
    EXPECT_THAT(alone.output, HasSubstr("gloo"));
  }

  // Under the launcher: the job ends, non-zero, with the message forwarded.
  CommandResult launched =
      RunCommand(absl::StrCat("OMP_NUM_THREADS=1 SYNCLINE_BACKEND=nosuch ", Launcher(),
                              " -n 2 -- ", AllreduceExample(), " --count 16"),
                 absl::Seconds(60));
  EXPECT_NE(launched.exit_code, 0) << launched.output;
  EXPECT_LT(launched.seconds, 10.0) << launched.output;
  EXPECT_THAT(launched.output, HasSubstr("nosuch"));
  EXPECT_THAT(launched.output, HasSubstr("root cause: rank "));
}

}  // namespace
}  // namespace syncline::testing
