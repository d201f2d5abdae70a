#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "supervisor.h"

namespace syncline::run {
namespace {

// A pipe whose ends close themselves; both ends are close-on-exec so that a
// worker never inherits another worker's pipes.
struct Pipe {
  int read = -1;
  int write = -1;
  ~Pipe() {
    if (read >= 0) close(read);
    if (write >= 0) close(write);
  }
  absl::Status Open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
    }
    read = fds[0];
    write = fds[1];
    return absl::OkStatus();
  }
  int ReleaseRead() { return std::exchange(read, -1); }
};

// Builds a NULL-terminated char* array over `strings`, which must outlive it.
std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// This program, to run as each worker's supervisor; "" when /proc is not
// there to say (then workers run unsupervised, as direct children).
const std::string& SelfExecutable() {
  static const std::string* const self = [] {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    return new std::string(n > 0 ? std::string(buf, n) : "");
  }();
  return *self;
}

// Runs in the forked child: only async-signal-safe calls until execve.
// Execs `path`: the supervisor, which reports the worker's pid, or the
// program itself when unsupervised. A failure is reported as
// SupervisorReport{0, errno}.
[[noreturn]] void ExecChild(pid_t parent, bool supervised, int in_fd, int out_fd,
                            int err_fd, int report_fd, const char* path, char* const* argv,
                            char* const* envp) {
  setpgid(0, 0);
  // Die with the launcher. If it already died between fork and prctl, the
  // death signal would never come, so check the parent is still ours. The
  // supervisor catches its SIGHUP to take the worker's tree down with it.
  prctl(PR_SET_PDEATHSIG, supervised ? SIGHUP : SIGKILL);
  if (getppid() != parent) _exit(127);
  // The launcher ignores SIGPIPE and catches SIGINT/SIGTERM/SIGCHLD; exec
  // resets caught signals but not ignored ones, nor the mask.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  SupervisorReport failed;
  if ((in_fd >= 0 && dup2(in_fd, STDIN_FILENO) < 0) || dup2(out_fd, STDOUT_FILENO) < 0 ||
      dup2(err_fd, STDERR_FILENO) < 0 ||
      (supervised && fcntl(report_fd, F_SETFD, 0) != 0)) {
    failed.exec_errno = errno;
    (void)!write(report_fd, &failed, sizeof(failed));
    _exit(127);
  }
  execve(path, argv, envp);
  failed.exec_errno = errno;
  (void)!write(report_fd, &failed, sizeof(failed));
  _exit(127);
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string SignalName(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  if (abbrev == nullptr) return absl::StrCat("signal ", signo);
  return absl::StrCat("SIG", abbrev);
}

std::string WorkerExit::Describe() const {
  if (signal != 0) return absl::StrCat("killed by ", SignalName(signal));
  return absl::StrCat("exited ", exit_code);
}

absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::string& path_env) {
  if (program.empty()) {
    return absl::InvalidArgumentError("no program to run was given");
  }
  if (program.find('/') != std::string::npos) {
    if (IsExecutableFile(program)) return program;
    return absl::NotFoundError(absl::StrCat(
        "cannot run '", program, "': ",
        access(program.c_str(), F_OK) == 0 ? "not an executable file" : "no such file"));
  }
  std::vector<std::string> dirs = absl::StrSplit(path_env, ':');
  for (std::string& dir : dirs) {
    if (dir.empty()) dir = ".";  // an empty PATH entry means the current dir
    std::string candidate = absl::StrCat(dir, "/", program);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(
      "'", program, "' was not found in PATH (searched ", absl::StrJoin(dirs, ":"), ")"));
}

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Spawn(
    const WorkerSpec& spec) {
  Pipe out, err, report;
  for (Pipe* p : {&out, &err, &report}) {
    absl::Status s = p->Open();
    if (!s.ok()) return s;
  }
  // Everything the child needs is prepared before fork: after fork it may
  // not allocate.
  pid_t parent = getpid();
  const std::string& self = SelfExecutable();
  const bool supervised = !self.empty();
  std::vector<std::string> command =
      supervised ? SupervisorCommand(self, parent, report.write, spec.path, spec.argv)
                 : spec.argv;
  const std::string& exec_path = supervised ? self : spec.path;
  std::vector<char*> argv = CStrings(command);
  std::vector<char*> envp = CStrings(spec.env);
  // A worker is in its own process group, so reading a terminal would stop
  // it (SIGTTIN) and the job would hang silently; it reads /dev/null instead.
  // A pipe or file on stdin is passed through.
  int in_fd = -1;
  if (isatty(STDIN_FILENO)) in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = fork();
  if (pid != 0 && in_fd >= 0) close(in_fd);
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("fork for rank ", spec.rank, ": ", strerror(errno)));
  }
  if (pid == 0) {
    ExecChild(parent, supervised, in_fd, out.write, err.write, report.write,
              exec_path.c_str(), argv.data(), envp.data());
  }
  // Also set the group here: whichever of parent and child runs first, the
  // group exists before the launcher ever signals it.
  setpgid(pid, pid);
  close(std::exchange(report.write, -1));
  close(std::exchange(out.write, -1));
  close(std::exchange(err.write, -1));

  // The report: the worker's pid, or exec's errno. Unsupervised, EOF alone
  // means exec succeeded (the pipe closed on exec).
  SupervisorReport report_data;
  size_t got = 0;
  while (got < sizeof(report_data)) {
    ssize_t n = read(report.read, reinterpret_cast<char*>(&report_data) + got,
                     sizeof(report_data) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  const bool started = got == sizeof(report_data) ? report_data.exec_errno == 0
                                                  : got == 0 && !supervised;
  if (!started) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    int exec_errno = report_data.exec_errno;
    if (got != sizeof(report_data)) {
      return absl::InternalError(absl::StrCat(
          "the supervisor (", self, ") of rank ", spec.rank,
          " ended before starting the program: ",
          WIFSIGNALED(status) ? absl::StrCat("killed by ", SignalName(WTERMSIG(status)))
                              : absl::StrCat("exited ", WEXITSTATUS(status))));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot execute '", spec.path, "' for rank ", spec.rank, ": ",
        strerror(exec_errno),
        exec_errno == ENOEXEC ? " (a script needs a #! line, e.g. #!/bin/sh)" : ""));
  }
  pid_t worker_pid = supervised ? report_data.worker_pid : pid;
  for (int fd : {out.read, err.read}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return std::unique_ptr<WorkerProcess>(new WorkerProcess(
      spec.rank, pid, worker_pid, out.ReleaseRead(), err.ReleaseRead()));
}

WorkerProcess::WorkerProcess(int rank, pid_t leader, pid_t pid, int stdout_fd,
                             int stderr_fd)
    : rank_(rank),
      leader_(leader),
      pid_(pid),
      stdout_fd_(stdout_fd),
      stderr_fd_(stderr_fd),
      start_time_(absl::Now()) {}

WorkerProcess::~WorkerProcess() {
  CloseOutput(stdout_fd_);
  CloseOutput(stderr_fd_);
  if (running()) {
    Signal(SIGKILL);
    int status;
    while (waitpid(leader_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void WorkerProcess::CloseOutput(int fd) {
  // Only our own descriptors: a number closed earlier may belong to someone
  // else by now.
  if (fd < 0 || (fd != stdout_fd_ && fd != stderr_fd_)) return;
  if (fd == stdout_fd_) stdout_fd_ = -1;
  if (fd == stderr_fd_) stderr_fd_ = -1;
  close(fd);
}

void WorkerProcess::Signal(int signo) {
  // The group outlives a reaped worker while anything it started still runs
  // (and keeps its pid from being reused), so it is signalled even then.
  if (kill(-leader_, signo) != 0 && running()) kill(leader_, signo);
}

bool WorkerProcess::TryReap() {
  if (!running()) return false;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(leader_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != leader_) return false;
  WorkerExit e;
  e.time = absl::Now();
  if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
  } else {
    e.exit_code = WEXITSTATUS(status);
  }
  exit_ = e;
  return true;
}

}  // namespace syncline::run
