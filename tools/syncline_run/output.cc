#include "output.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace syncline::run {

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      // Our stdout may be a non-blocking pipe set up by whoever started us.
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
    } else {
      return;
    }
  }
}

void Say(absl::string_view message) {
  WriteAll(STDERR_FILENO, absl::StrCat("syncline-run: ", message, "\n"));
}

LineForwarder::LineForwarder(int rank, int out_fd, size_t tail_lines)
    : prefix_(absl::StrCat("[rank ", rank, "] ")),
      out_fd_(out_fd),
      tail_lines_(tail_lines) {}

void LineForwarder::Consume(absl::string_view bytes) {
  while (!bytes.empty()) {
    size_t newline = bytes.find('\n');
    if (newline == absl::string_view::npos) {
      pending_.append(bytes.data(), bytes.size());
      // A program that writes a progress bar with '\r' and never a newline
      // must not make us buffer forever.
      while (pending_.size() >= kMaxLineBytes) {
        Emit(absl::string_view(pending_).substr(0, kMaxLineBytes));
        pending_.erase(0, kMaxLineBytes);
      }
      return;
    }
    if (pending_.empty()) {
      Emit(bytes.substr(0, newline));
    } else {
      pending_.append(bytes.data(), newline);
      Emit(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void LineForwarder::Finish() {
  if (pending_.empty()) return;
  Emit(pending_);
  pending_.clear();
}

bool LineForwarder::ReadFrom(int fd, int max_chunks) {
  char buffer[64 * 1024];
  for (int i = 0; i < max_chunks; ++i) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      Consume(absl::string_view(buffer, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    Finish();  // EOF, or an error that will not go away
    return false;
  }
  return true;
}

void LineForwarder::Emit(absl::string_view line) {
  // Drop a '\r' left by CRLF output so the summary and the terminal agree.
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  WriteAll(out_fd_, absl::StrCat(prefix_, line, "\n"));
  if (tail_lines_ == 0) return;
  tail_.emplace_back(line);
  if (tail_.size() > tail_lines_) tail_.pop_front();
}

}  // namespace syncline::run
