// multiprocess.cc: fork+exec rank processes of the current test.
#include "common/multiprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "syncline/tcp_store.h"

extern char** environ;

namespace syncline::testing {
namespace {

constexpr char kChildRankVar[] = "SYNCLINE_TEST_CHILD_RANK";
constexpr char kChildSizeVar[] = "SYNCLINE_TEST_CHILD_SIZE";
// Under an external launcher (see multiprocess.h): the variable that holds
// a child's rank, the folder for its log and exit status, and its per-rank
// environment ("K=V" lines in SYNCLINE_TEST_CHILD_ENV_<rank>).
constexpr char kLauncherVar[] = "SYNCLINE_TEST_LAUNCHER";
constexpr char kLauncherRankVar[] = "SYNCLINE_TEST_LAUNCHER_RANK_VAR";
constexpr char kChildRankFromVar[] = "SYNCLINE_TEST_CHILD_RANK_FROM";
constexpr char kChildDirVar[] = "SYNCLINE_TEST_CHILD_DIR";
constexpr char kChildEnvPrefix[] = "SYNCLINE_TEST_CHILD_ENV_";

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  buf[n > 0 ? n : 0] = '\0';
  return buf;
}

std::string CurrentTestFilter() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat(info->test_suite_name(), ".", info->name());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Spawns `argv` with `env` extra variables, stdout+stderr to `out_path`.
pid_t Spawn(const std::vector<std::string>& argv,
            const std::map<std::string, std::string>& env, const std::string& out_path) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string s = *e;
    std::string name = s.substr(0, s.find('='));
    if (env.count(name) == 0) env_strings.push_back(s);
  }
  for (const auto& [k, v] : env) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    // Die with the test (a ctest timeout SIGKILLs it, which no cleanup code
    // sees). The signal follows the forking thread, which is the test's main
    // thread here. If the parent died before prctl took effect, getppid() no
    // longer names it: exit rather than run on as an orphan.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::setpgid(0, 0);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(out);
  return pid;
}

// Starts every rank with MASTER_PORT=`port` and waits for them.
std::vector<RankResult> SpawnAndWait(int world_size, const RunOptions& options, int port) {
  char dir_template[] = "/tmp/syncline-test-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  std::vector<RankResult> results(world_size);
  absl::Time start = absl::Now();
  for (int r = 0; r < world_size; ++r) {
    std::map<std::string, std::string> env = {
        {kChildRankVar, absl::StrCat(r)},
        {kChildSizeVar, absl::StrCat(world_size)},
        {"SYNCLINE_RANK", absl::StrCat(r)},
        {"SYNCLINE_WORLD_SIZE", absl::StrCat(world_size)},
        {"SYNCLINE_LOCAL_RANK", absl::StrCat(r)},
        {"SYNCLINE_LOCAL_WORLD_SIZE", absl::StrCat(world_size)},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", absl::StrCat(port)},
        {"SYNCLINE_STORE_HOSTED", options.host_store ? "1" : "0"},
    };
    for (const auto& [k, v] : options.env) env[k] = v;
    auto it = options.rank_env.find(r);
    if (it != options.rank_env.end()) for (const auto& [k, v] : it->second) env[k] = v;
    results[r].rank = r;
    results[r].pid = Spawn({SelfExe(), "--gtest_filter=" + CurrentTestFilter()}, env,
                           absl::StrCat(dir, "/rank", r, ".log"));
  }
  absl::Time deadline = start + options.timeout;
  int remaining = world_size;
  while (remaining > 0) {
    for (RankResult& res : results) {
      if (res.pid <= 0 || res.exit_code != -1 || res.signal != 0) continue;
      int status = 0;
      pid_t got = ::waitpid(res.pid, &status, WNOHANG);
      if (got == res.pid) {
        res.seconds = absl::ToDoubleSeconds(absl::Now() - start);
        if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
        else res.signal = WTERMSIG(status);
        --remaining;
      }
    }
    if (remaining == 0) break;
    if (absl::Now() > deadline) {
      for (RankResult& res : results) {
        if (res.exit_code == -1 && res.signal == 0) {
          ::kill(-res.pid, SIGKILL);
          ::kill(res.pid, SIGKILL);
          int status = 0;
          ::waitpid(res.pid, &status, 0);
          res.timed_out = true;
          res.signal = SIGKILL;
          res.seconds = absl::ToDoubleSeconds(absl::Now() - start);
        }
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  for (RankResult& res : results) {
    std::string path = absl::StrCat(dir, "/rank", res.rank, ".log");
    res.output = ReadFile(path);
    ::unlink(path.c_str());
  }
  ::rmdir(dir.c_str());
  return results;
}

// Starts every rank as one job of the external launcher (`launcher` with
// {n} replaced by the world size) and waits for it. Each rank writes its
// output and exit code to `dir` itself (ChildUnderLauncher below).
std::vector<RankResult> SpawnUnderLauncher(int world_size, const RunOptions& options,
                                           int port, const std::string& launcher,
                                           const std::string& rank_var) {
  char dir_template[] = "/tmp/syncline-test-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  std::map<std::string, std::string> env = {
      {kChildRankFromVar, rank_var},
      {kChildSizeVar, absl::StrCat(world_size)},
      {kChildDirVar, dir},
      {"SYNCLINE_WORLD_SIZE", absl::StrCat(world_size)},
      {"SYNCLINE_LOCAL_WORLD_SIZE", absl::StrCat(world_size)},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", absl::StrCat(port)},
      {"SYNCLINE_STORE_HOSTED", options.host_store ? "1" : "0"},
  };
  for (const auto& [k, v] : options.env) env[k] = v;
  for (const auto& [r, vars] : options.rank_env) {
    std::string lines;
    for (const auto& [k, v] : vars) absl::StrAppend(&lines, k, "=", v, "\n");
    env[absl::StrCat(kChildEnvPrefix, r)] = lines;
  }
  const std::string command = absl::StrCat(
      absl::StrReplaceAll(launcher, {{"{n}", absl::StrCat(world_size)}}), " '", SelfExe(),
      "' '--gtest_filter=", CurrentTestFilter(), "'");
  const absl::Time start = absl::Now();
  const std::string launcher_log = dir + "/launcher.log";
  const pid_t pid = Spawn({"/bin/sh", "-c", command}, env, launcher_log);
  int status = 0;
  bool timed_out = false;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (absl::Now() > start + options.timeout) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const std::string said = ReadFile(launcher_log);
  ::unlink(launcher_log.c_str());
  std::vector<RankResult> results(world_size);
  for (int r = 0; r < world_size; ++r) {
    RankResult& res = results[r];
    res.rank = r;
    res.seconds = seconds;
    res.timed_out = timed_out;
    const std::string log = absl::StrCat(dir, "/rank", r, ".log");
    const std::string exit = absl::StrCat(dir, "/rank", r, ".exit");
    res.output = ReadFile(log);
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(exit)), &res.exit_code)) {
      // It never returned from the test body: killed, or taken down with
      // the job by the launcher (which says which in its output).
      res.exit_code = -1;
      res.signal = SIGKILL;
      absl::StrAppend(&res.output, "[rank ", r,
                      " ended without an exit status; the launcher (`", command, "`) ",
                      timed_out ? "was killed at the test deadline"
                                : absl::StrCat("ended with status ", status),
                      " and said:]\n", said);
    }
    ::unlink(log.c_str());
    ::unlink(exit.c_str());
  }
  ::rmdir(dir.c_str());
  return results;
}

// In a child started by a launcher: its rank, its environment, and its
// output into the folder the parent reads.
int ChildUnderLauncher() {
  int rank = -1;
  const char* from = std::getenv(std::getenv(kChildRankFromVar));
  if (from == nullptr || !absl::SimpleAtoi(from, &rank)) {
    std::fprintf(stderr, "RunRanks: the launcher did not set %s\n",
                 std::getenv(kChildRankFromVar));
    ::_exit(2);
  }
  ::setenv("SYNCLINE_RANK", absl::StrCat(rank).c_str(), 1);
  ::setenv("SYNCLINE_LOCAL_RANK", absl::StrCat(rank).c_str(), 1);
  if (const char* lines = std::getenv(absl::StrCat(kChildEnvPrefix, rank).c_str())) {
    for (absl::string_view line : absl::StrSplit(lines, '\n', absl::SkipEmpty())) {
      const size_t eq = line.find('=');
      ::setenv(std::string(line.substr(0, eq)).c_str(),
               std::string(line.substr(eq + 1)).c_str(), 1);
    }
  }
  const std::string log = absl::StrCat(std::getenv(kChildDirVar), "/rank", rank, ".log");
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ::dup2(out, 1);
  ::dup2(out, 2);
  ::close(out);
  return rank;
}

}  // namespace

bool IsChild() {
  return std::getenv(kChildRankVar) != nullptr || std::getenv(kChildRankFromVar) != nullptr;
}

std::vector<RankResult> RunRanks(int world_size, const std::function<void(int, int)>& body,
                                 const RunOptions& options) {
  if (IsChild()) {
    int rank = 0, size = 0;
    const bool launched = std::getenv(kChildRankVar) == nullptr;
    if (launched) {
      rank = ChildUnderLauncher();
    } else {
      (void)absl::SimpleAtoi(std::getenv(kChildRankVar), &rank);
    }
    (void)absl::SimpleAtoi(std::getenv(kChildSizeVar), &size);
    body(rank, size);
    bool failed = ::testing::Test::HasFailure();
    std::fflush(stdout);
    std::fflush(stderr);
    if (launched) {
      std::ofstream(absl::StrCat(std::getenv(kChildDirVar), "/rank", rank, ".exit"))
          << (failed ? 1 : 0) << "\n";
    }
    // Skip static destructors: backend threads may still be winding down.
    ::_exit(failed ? 1 : 0);
  }
  const char* launcher = std::getenv(kLauncherVar);
  if (launcher != nullptr && *launcher != '\0') {
    const char* rank_var = std::getenv(kLauncherRankVar);
    EXPECT_TRUE(rank_var != nullptr && *rank_var != '\0')
        << kLauncherVar << " needs " << kLauncherRankVar << " (e.g. OMPI_COMM_WORLD_RANK)";
    EXPECT_TRUE(options.host_store) << "ranks under " << kLauncherVar
                                    << " use a store the test hosts";
    auto server = TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok() || rank_var == nullptr) return {};
    return SpawnUnderLauncher(world_size, options, (*server)->port(), launcher, rank_var);
  }
  if (options.host_store) {
    auto server = TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return {};
    return SpawnAndWait(world_size, options, (*server)->port());
  }
  // Rank 0 hosts the store, so its port must be named before it binds. A
  // port probed free here can be taken before rank 0 binds it (by another
  // test's store, or as the ephemeral port of some connection); rank 0 then
  // fails with EADDRINUSE, and the whole run is repeated on a fresh port.
  // Binding port 0 in rank 0 and publishing the port would need a channel
  // the other ranks already share, which is what the store is for.
  constexpr int kAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    int port = attempt == 1 ? options.first_port : 0;
    if (port == 0) {
      port = 29500;
      auto probe = TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
      if (probe.ok()) port = (*probe)->port();
    }
    std::vector<RankResult> results = SpawnAndWait(world_size, options, port);
    const bool port_taken =
        !results.empty() &&
        absl::StrContains(results[0].output, "another program uses that port");
    if (!port_taken || attempt == kAttempts) return results;
    std::fprintf(stderr, "RunRanks: port %d was taken before rank 0 bound it; retrying\n",
                 port);
  }
}

void ExpectAllSucceeded(const std::vector<RankResult>& results) {
  for (const RankResult& r : results) {
    EXPECT_TRUE(r.exit_code == 0 && r.signal == 0)
        << "rank " << r.rank << " ended with exit code " << r.exit_code << " signal "
        << r.signal << (r.timed_out ? " (killed at the test deadline)" : "")
        << " after " << r.seconds << " s; its output:\n" << r.output;
  }
}

CommandResult RunCommand(const std::string& command, absl::Duration timeout) {
  CommandResult result;
  char path_template[] = "/tmp/syncline-cmd-XXXXXX";
  int fd = ::mkstemp(path_template);
  ::close(fd);
  absl::Time start = absl::Now();
  pid_t pid = Spawn({"/bin/sh", "-c", command}, {}, path_template);
  int status = 0;
  while (true) {
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (absl::Now() - start > timeout) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.output = ReadFile(path_template);
  ::unlink(path_template);
  return result;
}

std::string BuildBinDir() { return SYNCLINE_BUILD_BIN_DIR; }
std::string BuildLibDir() { return SYNCLINE_BUILD_LIB_DIR; }

std::shared_ptr<Store> ConnectJobStore() {
  const char* port = std::getenv("MASTER_PORT");
  int port_number = 0;
  if (port == nullptr || !absl::SimpleAtoi(port, &port_number)) return nullptr;
  auto tcp = ConnectTcpStore({.host = "127.0.0.1", .port = port_number});
  EXPECT_TRUE(tcp.ok()) << tcp.status();
  return tcp.ok() ? *tcp : nullptr;
}

}  // namespace syncline::testing
