// signals.h: turns SIGCHLD, SIGINT and SIGTERM into readable events.
//
// The launcher's poll loop must wake at once when a worker dies or the user
// presses Ctrl-C. A self-pipe does that: the handler writes the signal number
// into a non-blocking pipe that the loop polls. (signalfd would need the
// signals blocked in every thread, including the store server's, and in
// every child until exec.)
//
// SIGPIPE is ignored: the launcher must outlive a closed stdout and still
// stop its workers.
//
// Only one SignalPipe may exist at a time (the handler reaches it through a
// global). Thread safety: Drain() from the main thread only.
//
// Example:
//   SL_ASSIGN_OR_RETURN(auto signals, SignalPipe::Install());
//   pollfd p{signals->fd(), POLLIN, 0};
//   ... poll ...
//   for (int signo : signals->Drain()) { ... }
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_SIGNALS_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_SIGNALS_H_

#include <signal.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace syncline::run {

class SignalPipe {
 public:
  // Installs the handlers. Fails if one is already installed.
  static absl::StatusOr<std::unique_ptr<SignalPipe>> Install();
  // Restores the default handlers and closes the pipe.
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Becomes readable when a signal has arrived.
  int fd() const { return read_fd_; }

  // The signals received since the last call, in order (SIGCHLD at most
  // once per call: a burst of deaths needs only one reaping pass).
  std::vector<int> Drain();

 private:
  SignalPipe(int read_fd, int write_fd);
  int read_fd_;
  int write_fd_;
};

// Blocks SIGCHLD, SIGINT and SIGTERM in the calling thread while it lives, so
// that threads started meanwhile (the store server's) inherit the mask and
// the handlers only ever run on the main thread, never interrupting another
// thread's system calls with EINTR.
class ScopedBlockLauncherSignals {
 public:
  ScopedBlockLauncherSignals();
  ~ScopedBlockLauncherSignals();
  ScopedBlockLauncherSignals(const ScopedBlockLauncherSignals&) = delete;
  ScopedBlockLauncherSignals& operator=(const ScopedBlockLauncherSignals&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_SIGNALS_H_
