// worker.h: one worker process of syncline-run, started with fork+exec.
//
// A WorkerProcess owns a child process and the read ends of its stdout and
// stderr pipes. The child is the worker's supervisor (supervisor.h): the
// launcher re-executed, leader of the worker's own process group, so that a
// signal from the launcher reaches whatever the worker started too (a shell
// script's `sleep`, a Python helper), and a subreaper that kills the whole
// tree when the launcher dies, so an aborted launch leaves no stray process
// behind, grandchildren included. It exits as the worker did (code or
// signal). Without /proc/self/exe the worker is started directly, with
// PR_SET_PDEATHSIG only.
// When the launcher's stdin is a terminal the worker gets /dev/null instead:
// outside the terminal's foreground group, a read would stop it (SIGTTIN).
//
// Why fork+exec by hand rather than posix_spawn: the child must set its
// death signal between fork and exec. It calls only async-signal-safe
// functions there, so forking while the store server's thread runs is safe.
//
// Thread safety: a WorkerProcess is used by the launcher's main thread only.
//
// Example:
//   WorkerSpec spec{.rank = 0, .path = "/bin/echo", .argv = {"echo", "hi"},
//                   .env = {"RANK=0"}};
//   SL_ASSIGN_OR_RETURN(auto worker, WorkerProcess::Spawn(spec));
//   ... poll worker->stdout_fd(), call worker->TryReap() on SIGCHLD ...
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_WORKER_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_WORKER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace syncline::run {

// What a worker runs: a resolved executable path, its argv (argv[0]
// included) and its complete environment as "NAME=value" strings.
struct WorkerSpec {
  int rank = 0;
  std::string path;
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

// How a worker ended.
struct WorkerExit {
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // the terminating signal, 0 if it exited
  absl::Time time;    // when the launcher reaped it

  bool ok() const { return signal == 0 && exit_code == 0; }
  // The status a shell would report: the code, or 128 + signal.
  int ShellStatus() const { return signal != 0 ? 128 + signal : exit_code; }
  // "exited 3" or "killed by SIGKILL".
  std::string Describe() const;
};

// "SIGKILL" for 9; "signal 77" for a number without a name.
std::string SignalName(int signo);

// Finds `program` the way a shell does: as given when it contains a '/',
// otherwise in each folder of `path_env` (the PATH value). The error says
// which folders were searched.
absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::string& path_env);

class WorkerProcess {
 public:
  // Starts the worker. Fails, with errno's reason, when the pipes cannot be
  // made or the program cannot be executed (the child reports exec's errno
  // through a close-on-exec pipe, so "Permission denied" is not mistaken for
  // a worker that exited 127).
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Spawn(const WorkerSpec& spec);

  // Closes the pipes. A worker still running is killed and reaped, so no
  // zombie or orphan outlives its owner.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  int rank() const { return rank_; }
  // The program's pid (not its supervisor's), for messages.
  pid_t pid() const { return pid_; }
  absl::Time start_time() const { return start_time_; }

  // Read ends of the worker's stdout and stderr (non-blocking), or -1 once
  // closed with CloseOutput().
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  void CloseOutput(int fd);

  // Sends `signo` to the worker's process group, which includes anything the
  // worker started and left running, even after the worker was reaped.
  void Signal(int signo);

  // Reaps the worker if it has ended, without blocking. Returns true when
  // this call reaped it.
  bool TryReap();

  bool running() const { return !exit_.has_value(); }
  // Set once reaped.
  const std::optional<WorkerExit>& exit() const { return exit_; }

 private:
  WorkerProcess(int rank, pid_t leader, pid_t pid, int stdout_fd, int stderr_fd);

  int rank_;
  pid_t leader_;  // our child: the supervisor, leader of the process group
  pid_t pid_;
  int stdout_fd_;
  int stderr_fd_;
  absl::Time start_time_;
  std::optional<WorkerExit> exit_;
};

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_WORKER_H_
