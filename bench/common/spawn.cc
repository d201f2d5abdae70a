#include "bench/common/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

extern char** environ;

namespace syncline::bench {
namespace {

std::string NameOf(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

}  // namespace

pid_t SpawnSelf(const std::vector<std::string>& args,
                const std::vector<std::string>& extra_env, bool show_stdout) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool overridden = false;
    for (const std::string& extra : extra_env) {
      overridden = overridden || NameOf(extra) == NameOf(*e);
    }
    if (!overridden) env.emplace_back(*e);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());

  std::vector<std::string> argv_strings = {"/proc/self/exe"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!show_stdout) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(),
                             envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    std::fprintf(stderr, "spawn: posix_spawn(/proc/self/exe) failed: %s\n",
                 std::strerror(rc));
    return -1;
  }
  return pid;
}

bool WaitAll(const std::vector<pid_t>& pids, double timeout_s, std::string* why) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_s);
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  bool all_ok = true;
  why->clear();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      if (pids[i] <= 0) {
        done[i] = true;
        --left;
        all_ok = false;
        *why += "rank " + std::to_string(i) + " never started; ";
        continue;
      }
      int status = 0;
      const pid_t got = waitpid(pids[i], &status, WNOHANG);
      if (got != pids[i]) continue;
      done[i] = true;
      --left;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
      all_ok = false;
      *why += "rank " + std::to_string(i) +
              (WIFEXITED(status) ? " exited with " + std::to_string(WEXITSTATUS(status))
                                 : " died of signal " + std::to_string(WTERMSIG(status))) +
              "; ";
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        kill(pids[i], SIGKILL);
        waitpid(pids[i], nullptr, 0);
        *why += "rank " + std::to_string(i) + " killed after " +
                std::to_string(static_cast<int>(timeout_s)) + " s; ";
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return all_ok;
}

int LaunchRanksInTempDir(const char* name, int world_size, const std::string& dir_flag,
                         int argc, char** argv) {
  char dir[] = "/tmp/syncline-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::fprintf(stderr, "%s: mkdtemp: %s\n", name, std::strerror(errno));
    return 1;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < world_size; ++r) {
    std::vector<std::string> args(argv + 1, argv + argc);
    args.push_back("--rank=" + std::to_string(r));
    args.push_back(dir_flag + "=" + dir);
    pids.push_back(SpawnSelf(args, {}, /*show_stdout=*/r == 0));
  }
  std::string why;
  const bool ok = WaitAll(pids, 900, &why);
  if (!ok) std::fprintf(stderr, "%s: %s\n", name, why.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return ok ? 0 : 1;
}

}  // namespace syncline::bench
