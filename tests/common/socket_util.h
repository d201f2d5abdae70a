// socket_util.h: raw-socket helpers for the store tests.
#ifndef SYNCLINE_TESTS_COMMON_SOCKET_UTIL_H_
#define SYNCLINE_TESTS_COMMON_SOCKET_UTIL_H_

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

#include "absl/time/time.h"

namespace syncline::testing {

// Reads from `fd` until EOF or `wait` passes; true when the peer closed the
// connection (EOF or a reset).
inline bool ClosedByPeer(int fd, absl::Duration wait = absl::Seconds(2)) {
  timeval tv = absl::ToTimeval(wait);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_COMMON_SOCKET_UTIL_H_
