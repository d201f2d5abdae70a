// supervisor.h: the small process between syncline-run and each worker, so
// that no process of a job outlives the launcher.
//
// A worker's own children do not die with the launcher: PR_SET_PDEATHSIG
// reaches only the launcher's direct child, so a worker started through a
// wrapper (`bash -c '"$@"; echo done' w ./train`) would leave the real rank
// running, still allreducing with the other orphans. Therefore syncline-run
// starts each worker through itself, re-executed as a supervisor:
//
//   syncline-run (launcher)
//     └─ syncline-run --syncline-supervise ... (process-group leader,
//        │   subreaper, parent-death signal SIGHUP)
//        └─ the worker (same process group) └─ what it starts ...
//
//  - The supervisor is a child subreaper (PR_SET_CHILD_SUBREAPER): whatever
//    the worker starts and leaves behind is re-parented to it, not to init,
//    so it can always find and reap the whole tree.
//  - When the launcher dies (even by SIGKILL) the kernel sends the
//    supervisor SIGHUP; it then kills every process of its tree (its process
//    group, and every descendant, wherever it moved) and exits.
//  - When the worker ends, the supervisor kills what the worker left running
//    and exits with the worker's status: the same exit code, or the same
//    signal, so the launcher sees the worker's ending unchanged.
//  - SIGINT/SIGTERM that the launcher sends to the process group reach the
//    worker directly; the supervisor ignores them while its launcher lives.
//
// It reports to the launcher through a pipe: the worker's pid, or the errno
// of a failed exec (see SupervisorReport).
//
// Thread safety: the supervisor is single-threaded; RunSupervisor() is its
// main().
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_SUPERVISOR_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_SUPERVISOR_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace syncline::run {

// argv[1] of a syncline-run that is to act as a supervisor.
inline constexpr char kSuperviseFlag[] = "--syncline-supervise";

// What the supervisor (or the launcher's forked child, when it cannot even
// start the supervisor) writes to the report pipe: the worker's pid once its
// program runs, or 0 and exec's errno.
struct SupervisorReport {
  pid_t worker_pid = 0;
  int exec_errno = 0;
};

// The command line that runs `path` with `argv` under a supervisor:
// {self, kSuperviseFlag, <launcher pid>, <report fd>, path, argv...}.
std::vector<std::string> SupervisorCommand(const std::string& self, pid_t launcher,
                                           int report_fd, const std::string& path,
                                           const std::vector<std::string>& argv);

// The supervisor's main(): `argv` as built by SupervisorCommand. Returns
// only when it must exit with a code; a worker killed by a signal makes the
// supervisor die of the same signal.
int RunSupervisor(int argc, char** argv);

// Kills every process of the tree rooted at this process (its process
// group, and descendants wherever they moved) with SIGKILL and reaps them,
// until none is left. Call only as a subreaper, so that none can escape by
// being re-parented to init.
void KillOwnTree();

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_SUPERVISOR_H_
