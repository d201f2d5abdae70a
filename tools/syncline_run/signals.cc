#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace syncline::run {
namespace {

constexpr int kHandled[] = {SIGCHLD, SIGINT, SIGTERM};

// The write end of the installed pipe, for the handler; -1 when none.
std::atomic<int> g_write_fd{-1};

void OnSignal(int signo) {
  int saved = errno;  // the interrupted code may be about to read errno
  int fd = g_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    unsigned char byte = static_cast<unsigned char>(signo);
    // If the pipe is full, enough wake-ups are already pending.
    (void)!write(fd, &byte, 1);
  }
  errno = saved;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SignalPipe>> SignalPipe::Install() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    close(fds[0]);
    close(fds[1]);
    return absl::FailedPreconditionError("signal handlers already installed");
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  // SA_NOCLDSTOP: a worker stopped by SIGSTOP (a debugger) is not a death.
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int signo : kHandled) sigaction(signo, &sa, nullptr);
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, nullptr);
  return std::unique_ptr<SignalPipe>(new SignalPipe(fds[0], fds[1]));
}

SignalPipe::SignalPipe(int read_fd, int write_fd)
    : read_fd_(read_fd), write_fd_(write_fd) {}

SignalPipe::~SignalPipe() {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int signo : kHandled) sigaction(signo, &dfl, nullptr);
  g_write_fd.store(-1);
  close(read_fd_);
  close(write_fd_);
}

std::vector<int> SignalPipe::Drain() {
  std::vector<int> out;
  bool saw_child = false;
  unsigned char buffer[64];
  for (;;) {
    ssize_t n = read(read_fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] == SIGCHLD) {
        if (saw_child) continue;
        saw_child = true;
      }
      out.push_back(buffer[i]);
    }
  }
  return out;
}

ScopedBlockLauncherSignals::ScopedBlockLauncherSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signo : kHandled) sigaddset(&set, signo);
  pthread_sigmask(SIG_BLOCK, &set, &previous_);
}

ScopedBlockLauncherSignals::~ScopedBlockLauncherSignals() {
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace syncline::run
