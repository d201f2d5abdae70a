#include "supervisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace syncline::run {
namespace {

struct ProcEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  bool zombie = false;
};

// Parses /proc/<pid>/stat; false when the process is gone.
bool ReadProcStat(pid_t pid, ProcEntry* out) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name may hold spaces and ')': the fields follow the last ')'.
  const char* rest = strrchr(buf, ')');
  char state = 0;
  int ppid = 0, pgrp = 0;
  if (rest == nullptr || sscanf(rest + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) {
    return false;
  }
  *out = {pid, ppid, pgrp, state == 'Z' || state == 'X'};
  return true;
}

// The live processes of the tree rooted at this process, itself excluded:
// its descendants (wherever they moved, since as a subreaper it inherits
// every orphan of the tree) and the members of its process group.
std::set<pid_t> LiveTree() {
  const pid_t self = getpid();
  const pid_t group = getpgrp();
  std::multimap<pid_t, pid_t> children;
  std::set<pid_t> live;
  std::set<pid_t> tree;
  if (DIR* proc = opendir("/proc")) {
    while (dirent* e = readdir(proc)) {
      int pid = 0;
      ProcEntry p;
      if (!absl::SimpleAtoi(e->d_name, &pid) || !ReadProcStat(pid, &p)) continue;
      children.emplace(p.ppid, p.pid);
      if (p.zombie) continue;
      live.insert(p.pid);
      if (p.pgrp == group && p.pid != self) tree.insert(p.pid);
    }
    closedir(proc);
  }
  std::vector<pid_t> todo = {self};
  while (!todo.empty()) {
    pid_t parent = todo.back();
    todo.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      if (live.count(it->second) != 0) tree.insert(it->second);
      todo.push_back(it->second);
    }
  }
  return tree;
}

void ReapFinished() {
  int status;
  while (waitpid(-1, &status, WNOHANG) > 0) {
  }
}

// Exits the way the worker ended: its exit code, or death by its signal.
[[noreturn]] void ExitLike(int status) {
  if (WIFSIGNALED(status)) {
    int signo = WTERMSIG(status);
    // The worker already dumped its core if it was going to; ours is noise.
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(signo, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signo);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    raise(signo);
    _exit(128 + signo);  // a signal whose default is not to terminate
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

void Report(int fd, const SupervisorReport& report) {
  ssize_t n;
  do {
    n = write(fd, &report, sizeof(report));
  } while (n < 0 && errno == EINTR);
}

}  // namespace

std::vector<std::string> SupervisorCommand(const std::string& self, pid_t launcher,
                                           int report_fd, const std::string& path,
                                           const std::vector<std::string>& argv) {
  std::vector<std::string> command = {self, kSuperviseFlag, absl::StrCat(launcher),
                                      absl::StrCat(report_fd), path};
  command.insert(command.end(), argv.begin(), argv.end());
  return command;
}

void KillOwnTree() {
  for (;;) {
    std::set<pid_t> tree = LiveTree();
    ReapFinished();
    if (tree.empty()) return;
    for (pid_t pid : tree) kill(pid, SIGKILL);
    // Let the kills land (and orphans be re-parented here) before looking
    // again; a process forked between the scan and the kill is caught then.
    usleep(2000);
  }
}

int RunSupervisor(int argc, char** argv) {
  int launcher = 0;
  int report_fd = -1;
  if (argc < 6 || !absl::SimpleAtoi(argv[2], &launcher) ||
      !absl::SimpleAtoi(argv[3], &report_fd)) {
    fprintf(stderr, "syncline-run: %s is for syncline-run's own use\n", kSuperviseFlag);
    return 2;
  }
  const char* path = argv[4];
  char** worker_argv = argv + 5;

  // Signals are read from a signalfd, so they must be blocked first.
  sigset_t handled;
  sigemptyset(&handled);
  for (int signo : {SIGCHLD, SIGHUP, SIGINT, SIGTERM}) sigaddset(&handled, signo);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  int signals = signalfd(-1, &handled, SFD_CLOEXEC);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  fcntl(report_fd, F_SETFD, FD_CLOEXEC);
  // The launcher set our parent-death signal (SIGHUP) before exec; if it died
  // before that took effect, nobody is left to supervise for.
  if (signals < 0 || getppid() != launcher) {
    Report(report_fd, {0, signals < 0 ? errno : ESRCH});
    return 127;
  }

  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    Report(report_fd, {0, errno});
    return 127;
  }
  const pid_t self = getpid();
  pid_t worker = fork();
  if (worker < 0) {
    Report(report_fd, {0, errno});
    return 127;
  }
  if (worker == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != self) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(path, worker_argv);  // environ is the worker's environment
    int err = errno;
    (void)!write(exec_pipe[1], &err, sizeof(err));
    _exit(127);
  }
  close(exec_pipe[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  if (n > 0) {
    Report(report_fd, {0, exec_errno});
    close(report_fd);
    int status;
    while (waitpid(worker, &status, 0) < 0 && errno == EINTR) {
    }
    return 127;
  }
  Report(report_fd, {worker, 0});
  close(report_fd);

  int worker_status = 0;
  for (bool running = true; running;) {
    signalfd_siginfo info;
    ssize_t got = read(signals, &info, sizeof(info));
    if (got < 0 && errno == EINTR) continue;
    if (got != sizeof(info)) {
      // Cannot watch any more: do not leave the tree behind unsupervised.
      KillOwnTree();
      return 1;
    }
    if (info.ssi_signo == SIGCHLD) {
      // The worker, or an orphan of its tree that was re-parented here.
      int status = 0;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == worker) {
          worker_status = status;
          running = false;
        }
      }
      continue;
    }
    // SIGINT/SIGTERM from the launcher reached the worker through the
    // process group; it decides. Only the launcher's death concerns us.
    if (getppid() != launcher) {
      KillOwnTree();
      _exit(128 + SIGHUP);
    }
  }
  // Whatever the worker left running ends with it.
  KillOwnTree();
  ExitLike(worker_status);
}

}  // namespace syncline::run
