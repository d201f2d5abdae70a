// isolated.cc: a child process per run of probes, results over a pipe.
//
// Wire format, one record per probe in order: u32 field count, then per field
// u32 length and the bytes (host byte order: both ends are this program).
#include "isolated.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace syncline::doctor {
namespace {

void WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(3);  // the parent is gone
    done += static_cast<size_t>(n);
  }
}

void AppendU32(std::string* out, uint32_t v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

std::string Encode(const std::vector<std::string>& fields) {
  std::string out;
  AppendU32(&out, static_cast<uint32_t>(fields.size()));
  for (const std::string& f : fields) {
    AppendU32(&out, static_cast<uint32_t>(f.size()));
    out += f;
  }
  return out;
}

// Takes one whole record off the front of `buffer`, if it holds one.
bool TakeRecord(std::string* buffer, std::vector<std::string>* fields) {
  size_t at = 0;
  auto read_u32 = [&](uint32_t* v) {
    if (buffer->size() - at < sizeof(*v)) return false;
    std::memcpy(v, buffer->data() + at, sizeof(*v));
    at += sizeof(*v);
    return true;
  };
  uint32_t count = 0;
  if (!read_u32(&count)) return false;
  std::vector<std::string> out;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t len = 0;
    if (!read_u32(&len) || buffer->size() - at < len) return false;
    out.emplace_back(buffer->substr(at, len));
    at += len;
  }
  buffer->erase(0, at);
  *fields = std::move(out);
  return true;
}

[[noreturn]] void RunChild(const std::vector<IsolatedProbe>& probes, size_t first, int fd) {
  for (size_t i = first; i < probes.size(); ++i) WriteAll(fd, Encode(probes[i].run()));
  ::_exit(0);  // no destructors of what the probes loaded
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return absl::StrCat("signal ", sig, " (", ::strsignal(sig), ")");
  }
  return absl::StrCat("exit status ", WEXITSTATUS(status));
}

}  // namespace

std::vector<IsolatedResult> RunIsolated(const std::vector<IsolatedProbe>& probes,
                                        absl::Duration per_probe) {
  std::vector<IsolatedResult> results;
  while (results.size() < probes.size()) {
    int fds[2];
    if (::pipe(fds) != 0) {
      results.push_back({IsolatedResult::Outcome::kCrashed, {},
                         absl::StrCat("could not start a probing process: pipe: ",
                                      std::strerror(errno))});
      continue;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);  // so that what a library starts goes with it
      ::close(fds[0]);
      RunChild(probes, results.size(), fds[1]);
    }
    ::close(fds[1]);
    if (pid > 0) ::setpgid(pid, pid);  // as the child does: whichever runs first
    if (pid < 0) {
      ::close(fds[0]);
      results.push_back({IsolatedResult::Outcome::kCrashed, {},
                         absl::StrCat("could not start a probing process: fork: ",
                                      std::strerror(errno))});
      continue;
    }
    std::string buffer;
    absl::Time deadline = absl::Now() + per_probe;
    bool eof = false, hung = false;
    while (!eof && results.size() < probes.size()) {
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        hung = true;
        break;
      }
      pollfd p{fds[0], POLLIN, 0};
      int ready = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;  // the deadline is checked above
      char chunk[4096];
      ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof = true;
        break;
      }
      buffer.append(chunk, static_cast<size_t>(n));
      std::vector<std::string> fields;
      while (TakeRecord(&buffer, &fields)) {
        results.push_back({IsolatedResult::Outcome::kAnswered, std::move(fields), ""});
        deadline = absl::Now() + per_probe;  // each probe gets its own time
      }
    }
    ::close(fds[0]);
    if (hung) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);  // should the group not be set yet
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (results.size() == probes.size()) break;
    if (hung) {
      results.push_back({IsolatedResult::Outcome::kHung, {},
                         absl::StrCat("did not finish within ",
                                      absl::FormatDuration(per_probe))});
    } else {
      results.push_back({IsolatedResult::Outcome::kCrashed, {},
                         absl::StrCat("killed the process that ran it (", DescribeExit(status), ")")});
    }
  }
  return results;
}

}  // namespace syncline::doctor
