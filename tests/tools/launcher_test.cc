// Tests of syncline-run's supervision, with shell programs as workers: the
// environment each rank gets, output forwarding, failure detection and the
// root-cause summary, signal forwarding and restarts. The launcher runs as a
// real process through RunCommand; the oracle is what each worker printed.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher_test_util.h"
#include "syncline/rendezvous.h"
#include "syncline/tcp_store.h"

namespace syncline::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Runs syncline-run with `flags` and a `sh -c script` worker.
CommandResult RunLauncher(const std::string& flags, const std::string& script,
                          const std::string& env = "OMP_NUM_THREADS=1",
                          absl::Duration timeout = absl::Seconds(60)) {
  return RunCommand(
      absl::StrCat(env, " ", Launcher(), " ", flags, " -- sh -c ", ShellQuote(script)),
      timeout);
}

TEST(LauncherTest, GivesEachRankItsEnvironmentAndPrefixesItsOutput) {
  // SYNCLINE_RANK would override RANK in the core: the launcher must drop it.
  CommandResult r =
      RunLauncher("-n 4",
                  "echo \"RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK "
                  "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK "
                  "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT "
                  "HOSTED=$SYNCLINE_STORE_HOSTED PREFIX=$SYNCLINE_STORE_PREFIX "
                  "RESTARTS=$SYNCLINE_RESTART_COUNT SR=${SYNCLINE_RANK:-unset}\"; "
                  "echo \"to stderr from $RANK\" >&2",
                  "OMP_NUM_THREADS=1 SYNCLINE_RANK=7");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string port;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<std::string> lines =
        LinesWithPrefix(r.output, absl::StrCat("[rank ", rank, "] RANK="));
    ASSERT_EQ(lines.size(), 1u) << r.output;
    auto env = ParseAssignments("RANK=" + lines[0]);
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["HOSTED"], "1");
    EXPECT_EQ(env["PREFIX"], "gen0/");
    EXPECT_EQ(env["RESTARTS"], "0");
    EXPECT_EQ(env["SR"], "unset");
    if (rank == 0) port = env["MASTER_PORT"];
    EXPECT_EQ(env["MASTER_PORT"], port) << "ranks disagree on the port";
    EXPECT_THAT(r.output,
                HasSubstr(absl::StrCat("[rank ", rank, "] to stderr from ", rank)));
  }
  // Every line is either a worker's (prefixed) or the launcher's own.
  for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "[rank ") ||
                absl::StartsWith(line, "syncline-run: "))
        << "unprefixed line: " << line;
  }
}

TEST(LauncherTest, ForwardsWholeLinesOnly) {
  // A line written in two pieces arrives as one; a last line without a
  // newline is not lost; a flood from one rank is forwarded completely.
  CommandResult r =
      RunLauncher("-n 2",
                  "if [ \"$RANK\" = 0 ]; then printf 'first '; sleep 0.2; "
                  "printf 'half\\n'; printf 'no newline'; else seq 1 50000; fi");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 0] first half\n"));
  EXPECT_THAT(r.output, HasSubstr("[rank 0] no newline\n"));
  std::vector<std::string> flood = LinesWithPrefix(r.output, "[rank 1] ");
  ASSERT_EQ(flood.size(), 50000u);
  for (int i = 0; i < 50000; ++i) {
    ASSERT_EQ(flood[i], std::to_string(i + 1)) << "line " << i;
  }
}

TEST(LauncherTest, MasterPortZeroPicksAFreePort) {
  CommandResult r = RunLauncher("-n 2 --master-port 0", "echo \"port=$MASTER_PORT\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> ports = LinesWithPrefix(r.output, "[rank 0] port=");
  ASSERT_EQ(ports.size(), 1u) << r.output;
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(ports[0], &port)) << ports[0];
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("[rank 1] port=", port)));
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("store at 127.0.0.1:", port)));
}

TEST(LauncherTest, PortInUseIsAClearError) {
  TcpStoreServerOptions options;
  options.host = "127.0.0.1";
  auto server = TcpStoreServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  int port = (*server)->port();
  CommandResult r =
      RunLauncher(absl::StrCat("-n 2 --master-port ", port), "echo should-not-run");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(r.output, HasSubstr("in use"));
  EXPECT_THAT(r.output, Not(HasSubstr("should-not-run")));
}

// The store's quota comes from SYNCLINE_STORE_MAX_BYTES; a value that is no
// positive number is a bad option, named before anything starts.
TEST(LauncherTest, AStoreQuotaThatIsNoPositiveNumberIsRefused) {
  for (const char* bad : {"0", "lots"}) {
    CommandResult r =
        RunLauncher("-n 2", "echo should-not-run",
                    absl::StrCat("OMP_NUM_THREADS=1 SYNCLINE_STORE_MAX_BYTES=", bad));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("SYNCLINE_STORE_MAX_BYTES=", bad)));
    EXPECT_THAT(r.output, Not(HasSubstr("should-not-run")));
  }
}

// Removes every variable the launcher could take a job id from.
constexpr char kNoJobIdEnv[] =
    "env -u SYNCLINE_JOB_ID -u TORCHELASTIC_RUN_ID -u SLURM_JOB_ID -u SLURM_STEP_ID "
    "-u OMPI_MCA_ess_base_jobid OMP_NUM_THREADS=1";

// The value of `variable` that both ranks of a -n 2 job saw; "" (with a test
// failure) when the ranks disagree or one did not print it.
std::string SeenByBothRanks(const std::string& variable, const std::string& env,
                            const std::string& flags = "") {
  CommandResult r = RunLauncher(absl::StrCat("-n 2 ", flags),
                                absl::StrCat("echo \"seen=$", variable, "\""), env);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> t0 = LinesWithPrefix(r.output, "[rank 0] seen=");
  std::vector<std::string> t1 = LinesWithPrefix(r.output, "[rank 1] seen=");
  if (t0.size() != 1 || t1.size() != 1 || t0[0] != t1[0]) {
    ADD_FAILURE() << "the ranks saw different values of " << variable << ":\n" << r.output;
    return "";
  }
  if (variable == "SYNCLINE_STORE_TOKEN" && !t0[0].empty()) {
    EXPECT_THAT(LinesWithPrefix(r.output, "syncline-run: "),
                ::testing::Each(Not(HasSubstr(t0[0]))))
        << "the launcher printed the secret";
  }
  return t0[0];
}

std::string TokenOfJob(const std::string& env) {
  return SeenByBothRanks("SYNCLINE_STORE_TOKEN", env);
}

TEST(LauncherTest, DrawsAFreshStoreTokenForEachSingleNodeJob) {
  std::string first = TokenOfJob("OMP_NUM_THREADS=1 env -u SYNCLINE_STORE_TOKEN");
  std::string second = TokenOfJob("OMP_NUM_THREADS=1 env -u SYNCLINE_STORE_TOKEN");
  // 256 bits as hex.
  EXPECT_EQ(first.size(), 64u) << first;
  EXPECT_EQ(first.find_first_not_of("0123456789abcdef"), std::string::npos) << first;
  EXPECT_NE(first, second) << "two jobs got the same token";
  // A token the user set is the one the workers get.
  EXPECT_EQ(TokenOfJob("OMP_NUM_THREADS=1 SYNCLINE_STORE_TOKEN=chosen-by-user"),
            "chosen-by-user");
}

TEST(LauncherTest, MultiNodeJobWithoutAStoreTokenIsRefused) {
  for (const char* node : {"--node-rank 0", "--node-rank 1 --master-port 29999"}) {
    CommandResult r = RunCommand(absl::StrCat("env -u SYNCLINE_STORE_TOKEN ", Launcher(),
                                              " -n 1 --nnodes 2 ", node,
                                              " -- echo should-not-run"));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("needs SYNCLINE_STORE_TOKEN"));
    EXPECT_THAT(r.output, HasSubstr("export SYNCLINE_STORE_TOKEN="));
    EXPECT_THAT(r.output, HasSubstr("on every node"));
    EXPECT_THAT(r.output, Not(HasSubstr("should-not-run")));
  }
}

TEST(LauncherTest, EveryWorkerGetsTheJobId) {
  // Drawn at random, one per job.
  std::string first = SeenByBothRanks("SYNCLINE_JOB_ID", kNoJobIdEnv);
  std::string second = SeenByBothRanks("SYNCLINE_JOB_ID", kNoJobIdEnv);
  EXPECT_FALSE(first.empty());
  EXPECT_NE(first, second) << "two jobs got the same id";
  // Given on the command line (torchrun's spelling too), or by the scheduler.
  EXPECT_EQ(SeenByBothRanks("SYNCLINE_JOB_ID", kNoJobIdEnv, "--job-id train-42"),
            "train-42");
  EXPECT_EQ(SeenByBothRanks("SYNCLINE_JOB_ID", kNoJobIdEnv, "--rdzv-id=r7"), "r7");
  EXPECT_EQ(SeenByBothRanks("SYNCLINE_JOB_ID",
                            absl::StrCat(kNoJobIdEnv, " TORCHELASTIC_RUN_ID=te-9")),
            "te-9");
  EXPECT_EQ(SeenByBothRanks("SYNCLINE_JOB_ID", absl::StrCat(kNoJobIdEnv,
                                                            " SLURM_JOB_ID=1234 "
                                                            "SLURM_STEP_ID=0")),
            "1234.0");
}

TEST(LauncherTest, HelpEnvPrintsTheOptionTable) {
  CommandResult r = RunCommand(Launcher() + " --help-env");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("SYNCLINE_BACKEND"));
  EXPECT_THAT(r.output, HasSubstr("SYNCLINE_TIMEOUT"));
}

// The README's table is made with --markdown (env_test checks it is there).
TEST(LauncherTest, HelpEnvMarkdownPrintsTheReadmeTable) {
  CommandResult r = RunCommand(Launcher() + " --help-env --markdown");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::StartsWith("| Variable | Default | Meaning |\n|---|---|---|\n"));
  EXPECT_THAT(r.output, HasSubstr("| `SYNCLINE_TIMEOUT` | `300` | "));
}

TEST(LauncherTest, SetsOmpNumThreadsWhenUnset) {
  CommandResult r =
      RunLauncher("-n 2", "echo \"omp=$OMP_NUM_THREADS\"", "env -u OMP_NUM_THREADS");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int expected = std::max(1, AffinityCores() / 2);
  EXPECT_THAT(r.output, HasSubstr("OMP_NUM_THREADS is not set"));
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("[rank 0] omp=", expected)));
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("[rank 1] omp=", expected)));
}

TEST(LauncherTest, KeepsOmpNumThreadsWhenSet) {
  CommandResult r =
      RunLauncher("-n 2", "echo \"omp=$OMP_NUM_THREADS\"", "OMP_NUM_THREADS=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("OMP_NUM_THREADS is not set")));
  EXPECT_THAT(r.output, HasSubstr("[rank 0] omp=3"));
  EXPECT_THAT(r.output, HasSubstr("[rank 1] omp=3"));
}

TEST(LauncherTest, AcceptsTheProgramWithoutDoubleDash) {
  CommandResult r = RunCommand("OMP_NUM_THREADS=1 " + Launcher() + " -n 2 echo --n 7 -x");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 0] --n 7 -x"));
  EXPECT_THAT(r.output, HasSubstr("[rank 1] --n 7 -x"));
}

TEST(LauncherTest, ProgramThatCannotRunIsReported) {
  CommandResult r = RunCommand(Launcher() + " -n 2 -- /nonexistent/program");
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/program"));
}

TEST(LauncherTest, ScriptWithoutAnInterpreterLineIsReported) {
  std::string dir = MakeTempDir();
  std::string path = dir + "/no-shebang";
  std::ofstream(path) << "echo should-not-run\n";
  ASSERT_EQ(chmod(path.c_str(), 0755), 0);
  CommandResult r = RunCommand(absl::StrCat(Launcher(), " -n 2 -- ", path));
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("cannot execute '", path, "' for rank ")));
  EXPECT_THAT(r.output, HasSubstr("Exec format error"));
  EXPECT_THAT(r.output, HasSubstr("#!"));
}

// "pid command line" of every live process (zombies aside) of this user
// whose environment holds `marker` ("NAME=value").
std::vector<std::string> LiveProcessesWith(const std::string& marker) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::string base = absl::StrCat("/proc/", pid);
    std::ifstream env_file(base + "/environ");
    std::string env((std::istreambuf_iterator<char>(env_file)),
                    std::istreambuf_iterator<char>());
    std::vector<std::string> vars = absl::StrSplit(env, '\0');
    if (std::find(vars.begin(), vars.end(), marker) == vars.end()) continue;
    std::ifstream stat_file(base + "/stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)),
                     std::istreambuf_iterator<char>());
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') {
      continue;  // gone meanwhile, or a zombie
    }
    std::ifstream cmd_file(base + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(cmd_file)),
                    std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    found.push_back(absl::StrCat(pid, " ", cmd));
  }
  closedir(proc);
  return found;
}

TEST(LauncherTest, NoProcessOfTheJobOutlivesAKilledLauncher) {
  // Each rank runs under a wrapper (so the rank is the launcher's grandchild)
  // and starts a child of its own. The launcher is then SIGKILLed: nothing
  // of the job may survive it, whatever its depth in the tree.
  std::string dir = MakeTempDir();
  std::string marker = absl::StrCat("SYNCLINE_ORPHAN_TEST=", dir);
  std::string rank = WriteScript(dir, "rank.sh",
                                 absl::StrCat("sleep 600 &\n"
                                              "echo $$ > ", dir, "/ready.$RANK.tmp && mv ",
                                              dir, "/ready.$RANK.tmp ", dir,
                                              "/ready.$RANK\n"
                                              "sleep 600"));
  std::string script = absl::StrCat(
      marker, " OMP_NUM_THREADS=1 ", Launcher(), " -n 2 -- bash -c ",
      ShellQuote("\"$@\"; echo done"), " w ", rank, " > ", dir, "/out 2>&1 & l=$!\n",
      "while [ ! -e ", dir, "/ready.0 ] || [ ! -e ", dir, "/ready.1 ]; do sleep 0.05; done\n",
      "kill -KILL $l; wait $l; echo \"launcher-status=$?\"");
  CommandResult r = RunCommand(script, absl::Seconds(60));
  EXPECT_THAT(r.output, HasSubstr("launcher-status=137")) << r.output;
  // The job had really started: each rank under its wrapper, with a child.
  std::vector<std::string> ready = {WaitForFile(dir + "/ready.0", absl::ZeroDuration()),
                                                WaitForFile(dir + "/ready.1", absl::ZeroDuration())};
  EXPECT_THAT(ready, ::testing::Each(Not(::testing::IsEmpty())));

  absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::vector<std::string> left = LiveProcessesWith(marker);
  while (!left.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    left = LiveProcessesWith(marker);
  }
  EXPECT_THAT(left, ::testing::IsEmpty())
      << "processes of the job outlived its launcher by 30 s:\n"
      << absl::StrJoin(left, "\n");
  for (const std::string& p : left) {  // do not leak them into other tests
    int pid = 0;
    if (absl::SimpleAtoi(p.substr(0, p.find(' ')), &pid) && pid > 0) kill(pid, SIGKILL);
  }
}

// Not the launcher's but the harness's own promise, tested here beside the
// process-tree helpers: a process that RunCommand or RunRanks started dies
// with the test process, even when a ctest timeout SIGKILLs the test.
TEST(HarnessTest, ChildrenDieWithAKilledTest) {
  constexpr char kMiddle[] = "SYNCLINE_HARNESS_TEST_DIR";
  if (const char* dir = std::getenv(kMiddle)) {
    // The middle process: start a long child and wait to be SIGKILLed.
    RunCommand(absl::StrCat(": > ", ShellQuote(std::string(dir) + "/ready"), "; exec sleep 600"),
               absl::Seconds(600));
    return;
  }
  std::string dir = MakeTempDir();
  std::string marker = absl::StrCat(kMiddle, "=", dir);
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  CommandResult r = RunCommand(absl::StrCat(
      marker, " ", ShellQuote(self), " --gtest_filter=HarnessTest.ChildrenDieWithAKilledTest",
      " > /dev/null 2>&1 & m=$!\n", "while [ ! -e ", ShellQuote(dir + "/ready"),
      " ]; do sleep 0.05; done\n", "kill -KILL $m; wait $m; echo \"middle-status=$?\""),
      absl::Seconds(60));
  ASSERT_THAT(r.output, HasSubstr("middle-status=137")) << r.output;
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::vector<std::string> left = LiveProcessesWith(marker);
  while (!left.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    left = LiveProcessesWith(marker);
  }
  EXPECT_THAT(left, ::testing::IsEmpty()) << "outlived the killed test by 30 s:\n"
                                          << absl::StrJoin(left, "\n");
  for (const std::string& p : left) {
    int pid = 0;
    if (absl::SimpleAtoi(p.substr(0, p.find(' ')), &pid) && pid > 0) kill(pid, SIGKILL);
  }
}

TEST(LauncherTest, FailedRankStopsTheJobAndIsNamed) {
  // Rank 1 fails after 0.5 s; the others would run for a minute.
  CommandResult r =
      RunLauncher("-n 4",
                  "if [ \"$RANK\" = 1 ]; then sleep 0.5; echo 'rank 1 gives up' >&2; "
                  "exit 3; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_LT(r.seconds, 0.5 + 2.5) << r.output;
  EXPECT_THAT(r.output, HasSubstr("root cause: rank 1 (pid "));
  EXPECT_THAT(r.output, HasSubstr(") exited 3 at +"));
  EXPECT_THAT(r.output, HasSubstr("| rank 1 gives up"));
}

TEST(LauncherTest, FirstRankToDieIsTheRootCause) {
  // Rank 2 is SIGKILLed; the others then fail on their own (as peers of a
  // dead rank do) or are stopped. Rank 2 must be named, not the later ones.
  CommandResult r =
      RunLauncher("-n 4",
                  "if [ \"$RANK\" = 2 ]; then echo 'rank 2 last words' >&2; "
                  "(sleep 0.5; kill -9 $$) & exec sleep 60; fi; "
                  "echo \"rank $RANK waiting\" >&2; sleep 60");
  EXPECT_EQ(r.exit_code, 128 + 9) << r.output;
  EXPECT_LT(r.seconds, 0.5 + 2.5) << r.output;
  EXPECT_THAT(r.output, HasSubstr("root cause: rank 2 (pid "));
  EXPECT_THAT(r.output, HasSubstr(") killed by SIGKILL at +"));
  EXPECT_THAT(r.output, HasSubstr("| rank 2 last words"));
  size_t consequences = r.output.find("consequences:");
  ASSERT_NE(consequences, std::string::npos) << r.output;
  for (int rank : {0, 1, 3}) {
    EXPECT_NE(r.output.find(absl::StrCat("rank ", rank, " (pid "), consequences),
              std::string::npos)
        << "rank " << rank << " not listed as a consequence:\n"
        << r.output;
  }
}

TEST(LauncherTest, LocalFailureOutranksAPeerBlamingRankThatDiedAsSoon) {
  // Rank 1 fails on its own; rank 0 sees that (a flag file stands in for the
  // broken connection) and dies at once blaming its peer, within the same
  // millisecond or so. Exit order is a coin toss; rank 1 must be named.
  std::string dir = MakeTempDir();
  CommandResult r = RunLauncher(
      "-n 2", absl::StrCat("flag=", ShellQuote(dir + "/rank1-failed"), "; ",
                           "if [ \"$RANK\" = 1 ]; then "
                           "echo 'cannot open /data/shard-1: No such file or directory' >&2; "
                           ": > \"$flag\"; exit 2; fi; "
                           "until [ -e \"$flag\" ]; do :; done; "
                           "echo 'allreduce #7: peer rank 1 failed: Connection reset by peer' >&2; "
                           "exit 1"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("root cause: rank 1 (pid ")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("| cannot open /data/shard-1")) << r.output;
}

TEST(LauncherTest, FullDiskIsTheRootCauseThoughItsVictimExitedFirst) {
  // Rank 0 hits a real ENOSPC (writing /dev/full) and is still winding down
  // when rank 1, its victim, exits first blaming the peer. Rank 1's exit makes
  // the launcher stop rank 0, which then exits with its own code. Rank 0 must
  // be named although it exited last and was stopped.
  std::string dir = MakeTempDir();
  CommandResult r = RunLauncher(
      "-n 2", absl::StrCat("flag=", ShellQuote(dir + "/rank0-failed"), "; ",
                           "if [ \"$RANK\" = 0 ]; then "
                           "dd if=/dev/zero of=/dev/full bs=1 count=1 && exit 0; "
                           ": > \"$flag\"; trap 'exit 28' TERM; sleep 60 & wait $!; exit 0; fi; "
                           "until [ -e \"$flag\" ]; do sleep 0.01; done; "
                           "echo 'allreduce #3: peer rank 0 failed: the store closed the "
                           "connection' >&2; exit 1"));
  EXPECT_EQ(r.exit_code, 28) << r.output;
  EXPECT_THAT(r.output, HasSubstr("root cause: rank 0 (pid ")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("No space left on device")) << r.output;
  // The oracle for the order: rank 1 is listed as a consequence that ended
  // before the root cause.
  size_t consequences = r.output.find("consequences:");
  ASSERT_NE(consequences, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 (pid ", consequences), std::string::npos) << r.output;
}

TEST(LauncherTest, WorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  CommandResult r =
      RunLauncher("-n 2 --grace-period 1",
                  "trap '' TERM; if [ \"$RANK\" = 0 ]; then sleep 0.5; exit 4; fi; "
                  "while :; do sleep 0.1; done");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_GT(r.seconds, 0.5 + 1.0) << r.output;
  EXPECT_LT(r.seconds, 0.5 + 1.0 + 2.0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 1 (pid "));
  EXPECT_THAT(r.output, HasSubstr("killed by SIGKILL"));
}

// Runs `launcher_command` in the background with its output in <dir>/out,
// waits (up to 10 s) until `count` lines of that output hold `text`, then
// sends SIGTERM to the launcher only (not its process group). The output is
// "launcher-exit=<status>" followed by the launcher's.
CommandResult StopLauncherOncePrinted(const std::string& dir,
                                      const std::string& launcher_command,
                                      const std::string& text, int count) {
  return RunCommand(absl::StrCat(
      launcher_command, " > ", dir, "/out 2>&1 & pid=$!\n",
      "for i in $(seq 200); do [ \"$(grep -c ", ShellQuote(text), " ", dir,
      "/out)\" -ge ", count, " ] && break; sleep 0.05; done\n",
      "kill -TERM $pid; wait $pid; echo \"launcher-exit=$?\"; cat ", dir, "/out"));
}

TEST(LauncherTest, SigtermIsForwardedToTheWorkers) {
  std::string dir = MakeTempDir();
  std::string worker = WriteScript(dir, "worker.sh",
                                   "trap 'echo \"got-term-$RANK\"; exit 0' TERM\n"
                                   "echo ready\n"
                                   "while :; do sleep 0.1; done");
  // Wait until both workers have installed their trap.
  CommandResult r = StopLauncherOncePrinted(
      dir, absl::StrCat("OMP_NUM_THREADS=1 ", Launcher(), " -n 2 -- ", worker), "ready",
      2);
  EXPECT_THAT(r.output, HasSubstr("launcher-exit=143"));
  EXPECT_THAT(r.output, HasSubstr("[rank 0] got-term-0"));
  EXPECT_THAT(r.output, HasSubstr("[rank 1] got-term-1"));
  EXPECT_LT(r.seconds, 15) << r.output;
}

// A launcher stopped while its node waits for the others to check in ends
// at once, and starts no worker.
TEST(LauncherTest, SigtermWhileTheNodesCheckInEndsTheLauncherAtOnce) {
  std::string dir = MakeTempDir();
  // Node 1 never comes, so node 0 waits in its check-in for SYNCLINE_TIMEOUT.
  CommandResult r = StopLauncherOncePrinted(
      dir,
      absl::StrCat(TokenEnv(), "OMP_NUM_THREADS=1 SYNCLINE_TIMEOUT=120 ", Launcher(),
                   " -n 2 --nnodes 2 --node-rank 0 -- sh -c 'echo worker-started'"),
      "store at", 1);
  EXPECT_THAT(r.output, HasSubstr("launcher-exit=143"));
  EXPECT_THAT(r.output, HasSubstr("stopped before the workers started"));
  EXPECT_THAT(r.output, Not(HasSubstr("] worker-started")));
  EXPECT_LT(r.seconds, 60) << r.output;
}

TEST(LauncherTest, RestartsAfterAFailureInTheFirstGeneration) {
  std::string dir = MakeTempDir();
  std::string worker =
      WriteScript(dir, "flaky.sh",
                  "echo \"gen=$SYNCLINE_RESTART_COUNT prefix=$SYNCLINE_STORE_PREFIX\"\n"
                  "if [ \"$SYNCLINE_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then\n"
                  "  echo 'failing in generation 0' >&2; exit 5\n"
                  "fi");
  std::string base = absl::StrCat("OMP_NUM_THREADS=1 ", Launcher(), " -n 3 ");

  CommandResult once = RunCommand(base + "-- " + worker);
  EXPECT_EQ(once.exit_code, 5) << once.output;

  CommandResult restarted = RunCommand(base + "--max-restarts 1 -- " + worker);
  EXPECT_EQ(restarted.exit_code, 0) << restarted.output;
  EXPECT_THAT(restarted.output, HasSubstr("restart 1 of 1"));
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_THAT(restarted.output,
                HasSubstr(absl::StrCat("[rank ", rank, "] gen=1 prefix=gen1/")));
  }
}

TEST(LauncherTest, GivesUpWhenRestartsRunOut) {
  CommandResult r = RunLauncher("-n 2 --max-restarts 2",
                                "echo \"gen=$SYNCLINE_RESTART_COUNT\"; exit 6");
  EXPECT_EQ(r.exit_code, 6) << r.output;
  // Whichever rank exits first gets the other stopped, maybe before it
  // prints: only one line per generation is certain.
  EXPECT_THAT(r.output, HasSubstr("restart 2 of 2"));
  EXPECT_THAT(r.output, HasSubstr("] gen=2"));
  EXPECT_THAT(r.output, Not(HasSubstr("gen=3")));
  EXPECT_THAT(r.output, HasSubstr("no restarts left"));
}

TEST(LauncherTest, TwoNodesShareOneWorld) {
  std::string worker = ShellQuote(
      "echo \"RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK "
      "GROUP_RANK=$GROUP_RANK MASTER_PORT=$MASTER_PORT TOKEN=$SYNCLINE_STORE_TOKEN\"; "
      "echo \"job=$SYNCLINE_JOB_ID\"");
  CommandResult r = RunCommand(TwoNodeScript([&](int rank, const std::string& port) {
    return absl::StrCat(kNoJobIdEnv, " ", TokenEnv(), Launcher(),
                        " -n 2 --nnodes 2 --node-rank ", rank, " --master-port ", port,
                        " -- sh -c ", worker);
  }));
  EXPECT_THAT(r.output, HasSubstr("status=0,0"));
  const int port = ReportedStorePort(r.output);
  ASSERT_GT(port, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.output,
                HasSubstr(absl::StrCat("[rank ", rank, "] RANK=", rank,
                                       " WORLD_SIZE=4 LOCAL_RANK=", rank % 2,
                                       " GROUP_RANK=", rank / 2, " MASTER_PORT=", port,
                                       " TOKEN=test-secret-", getpid())));
  }
  // Node 1 had no job id of its own: it took node 0's.
  std::vector<std::string> jobs;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<std::string> job =
        LinesWithPrefix(r.output, absl::StrCat("[rank ", rank, "] job="));
    ASSERT_EQ(job.size(), 1u) << r.output;
    jobs.push_back(job[0]);
  }
  EXPECT_FALSE(jobs[0].empty());
  EXPECT_THAT(jobs, ::testing::Each(jobs[0])) << r.output;
}

// Runs node 0 and node 1 of a two-node job (2 ranks each) at once, each
// running `worker` (a script path); prints "status=<node 0>,<node 1>".
CommandResult RunTwoNodes(const std::string& flags, const std::string& worker) {
  return RunCommand(TwoNodeScript([&](int rank, const std::string& port) {
    return absl::StrCat(TokenEnv(), "OMP_NUM_THREADS=1 ", Launcher(),
                        " -n 2 --nnodes 2 --node-rank ", rank, " --master-port ", port, " ",
                        flags, " -- ", worker);
  }));
}

TEST(LauncherTest, FailureOnOneNodeStopsTheOtherNode) {
  // Node 0's ranks would sleep for a minute; only node 1's launcher sees the
  // failure directly, and node 0's must learn of it through the store.
  std::string dir = MakeTempDir();
  std::string worker = WriteScript(
      dir, "worker.sh", "if [ \"$RANK\" = 3 ]; then sleep 0.5; exit 7; fi\nsleep 60");
  CommandResult r = RunTwoNodes("", worker);
  EXPECT_THAT(r.output, HasSubstr("status=7,7"));
  EXPECT_LT(r.seconds, 0.5 + 4) << r.output;
  EXPECT_THAT(r.output, HasSubstr("node 1 reported: rank 3 (pid "));
  EXPECT_THAT(r.output, HasSubstr("root cause: rank 3 (pid "));  // node 1
  EXPECT_THAT(r.output, HasSubstr("root cause: on node 1, rank 3 (pid "));
}

TEST(LauncherTest, NodeThatCannotStartItsProgramStopsTheOthers) {
  CommandResult r = RunCommand(TwoNodeScript([&](int rank, const std::string& port) {
    return absl::StrCat(TokenEnv(), "OMP_NUM_THREADS=1 ", Launcher(),
                        " -n 2 --nnodes 2 --node-rank ", rank, " --master-port ", port,
                        " -- ", rank == 0 ? "sleep 60" : "/nonexistent/program");
  }));
  EXPECT_THAT(r.output, HasSubstr("status=127,127"));
  EXPECT_LT(r.seconds, 5) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("root cause: on node 1, cannot run '/nonexistent/program'"));
}

TEST(LauncherTest, RestartsAllNodesTogether) {
  std::string dir = MakeTempDir();
  std::string worker = WriteScript(dir, "flaky.sh",
                                   "if [ \"$SYNCLINE_RESTART_COUNT\" = 0 ]; then\n"
                                   "  if [ \"$RANK\" = 3 ]; then sleep 0.5; exit 7; fi\n"
                                   "  sleep 60\n"
                                   "fi\n"
                                   "echo \"gen=$SYNCLINE_RESTART_COUNT rank=$RANK\"");
  CommandResult r = RunTwoNodes("--max-restarts 1", worker);
  EXPECT_THAT(r.output, HasSubstr("status=0,0"));
  EXPECT_LT(r.seconds, 0.5 + 8) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("[rank ", rank, "] gen=1 rank=", rank)));
  }
}

// The worker of EachNodeChecksInOnceForItsRanks (this test binary, re-run
// under syncline-run): it meets through ConnectRendezvousStore as any
// program would, prints its pid and who claimed each rank's key (the pid in
// the check-in record "v1|rank|world|pid|..."), and rank 0 then plays a rank
// of another job that reaches the same store and prints how it was received.
void CheckInWorker() {
  absl::StatusOr<RendezvousInfo> info = ResolveRendezvous(-1, -1);
  ASSERT_TRUE(info.ok()) << info.status();
  absl::StatusOr<std::shared_ptr<Store>> store =
      ConnectRendezvousStore(*info, absl::Seconds(60));
  ASSERT_TRUE(store.ok()) << store.status();
  std::printf("worker pid=%d\n", static_cast<int>(getpid()));
  for (int r = 0; r < info->world_size; ++r) {
    absl::StatusOr<std::string> record =
        (*store)->Get(absl::StrCat("rdzv/rank/", r), absl::Seconds(10));
    ASSERT_TRUE(record.ok()) << record.status();
    std::vector<std::string> fields = absl::StrSplit(*record, '|');
    ASSERT_GE(fields.size(), 4u) << *record;
    std::printf("claim %d pid=%s\n", r, fields[3].c_str());
  }
  std::printf("arrived=%lld\n",
              static_cast<long long>(*(*store)->Add("rdzv/arrived", 0)));
  if (info->rank == 0) {
    RendezvousInfo intruder = *info;
    intruder.rank = 1;
    intruder.node_checked_in = false;
    intruder.job_id = "another-job";
    intruder.job_id_source = "SYNCLINE_JOB_ID";
    absl::Status refused = ConnectRendezvousStore(intruder, absl::Seconds(20)).status();
    std::printf("intruder: %s\n", refused.ToString().c_str());
  }
  std::fflush(stdout);
}

// syncline-run checks in once per node, for its node's ranks: in a job of 2
// nodes of 2 ranks, the keys of ranks 0-1 were claimed by one process and
// those of ranks 2-3 by another, neither of them a worker, and the arrival
// counter counts all 4 ranks. A rank of another job that reaches the store
// is still refused, naming both jobs.
TEST(LauncherTest, EachNodeChecksInOnceForItsRanksAndAnotherJobIsStillRefused) {
  if (getenv("SYNCLINE_TEST_CHECK_IN_WORKER") != nullptr) return CheckInWorker();
  char self[4096];
  ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(len, 0);
  self[len] = '\0';
  CommandResult r = RunTwoNodes(
      "", absl::StrCat("env SYNCLINE_TEST_CHECK_IN_WORKER=1 ", self,
                       " --gtest_filter=LauncherTest."
                       "EachNodeChecksInOnceForItsRanksAndAnotherJobIsStillRefused"));
  ASSERT_THAT(r.output, HasSubstr("status=0,0"));
  std::vector<std::string> workers;
  for (int rank = 0; rank < 4; ++rank) {
    std::string prefix = absl::StrCat("[rank ", rank, "] ");
    std::vector<std::string> pid = LinesWithPrefix(r.output, prefix + "worker pid=");
    ASSERT_EQ(pid.size(), 1u) << r.output;
    workers.push_back(pid[0]);
    EXPECT_THAT(r.output, HasSubstr(prefix + "arrived=4"));
  }
  // Every rank reads the same claims: one claimer per node.
  std::vector<std::string> claimer;
  for (int claimed = 0; claimed < 4; ++claimed) {
    std::vector<std::string> seen =
        LinesWithPrefix(r.output, absl::StrCat("[rank 0] claim ", claimed, " pid="));
    ASSERT_EQ(seen.size(), 1u) << r.output;
    claimer.push_back(seen[0]);
    EXPECT_THAT(workers, Not(::testing::Contains(seen[0])))
        << "rank " << claimed << " was checked in by a worker, not its launcher";
  }
  EXPECT_EQ(claimer[0], claimer[1]) << "node 0's ranks were checked in separately";
  EXPECT_EQ(claimer[2], claimer[3]) << "node 1's ranks were checked in separately";
  EXPECT_NE(claimer[0], claimer[2]) << "one process checked in both nodes";
  EXPECT_THAT(r.output, HasSubstr("[rank 0] intruder: FAILED_PRECONDITION"));
  EXPECT_THAT(r.output, HasSubstr("belongs to another job"));
  EXPECT_THAT(r.output, HasSubstr("Two jobs share MASTER_ADDR:MASTER_PORT"));
  // The job that holds the store is named with where its id came from.
  EXPECT_THAT(r.output, ::testing::ContainsRegex("job '[0-9a-f]+' \\(from syncline-run \\(random\\)\\)"));
}

}  // namespace
}  // namespace syncline::testing
