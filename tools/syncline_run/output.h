// output.h: forwards a worker's output line by line with a rank prefix.
//
// Each worker stream (stdout or stderr) gets one LineForwarder. Bytes arrive
// in arbitrary chunks from a non-blocking pipe; only whole lines are written,
// each as "[rank r] <line>\n" in a single write(), so lines of different
// ranks never interleave mid-line. A line longer than kMaxLineBytes is cut
// and forwarded in pieces rather than buffered without bound.
//
// The forwarder also keeps the stream's last lines, for the failure summary:
// the last words of a crashed rank are usually the explanation.
//
// Thread safety: used by the launcher's main thread only.
//
// Example:
//   LineForwarder err(/*rank=*/2, STDERR_FILENO, /*tail_lines=*/20);
//   err.Consume("partial ");
//   err.Consume("line\nnext");   // writes "[rank 2] partial line\n"
//   err.Finish();                // writes "[rank 2] next\n"
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_OUTPUT_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_OUTPUT_H_

#include <cstddef>
#include <deque>
#include <string>

#include "absl/strings/string_view.h"

namespace syncline::run {

// Writes all of `data` to `fd`, retrying on EINTR and waiting out EAGAIN.
// Errors (a closed pipe downstream) drop the data: the launcher's job is to
// manage workers, and it must not die because nobody reads its output.
void WriteAll(int fd, absl::string_view data);

// Writes "syncline-run: <message>\n" to stderr in one write.
void Say(absl::string_view message);

class LineForwarder {
 public:
  static constexpr size_t kMaxLineBytes = size_t{64} * 1024;

  // Forwards to `out_fd` with the prefix "[rank <rank>] " and keeps the last
  // `tail_lines` lines.
  LineForwarder(int rank, int out_fd, size_t tail_lines);

  // Appends bytes read from the worker and forwards every complete line.
  void Consume(absl::string_view bytes);

  // Forwards a final line that had no newline (the stream has ended).
  void Finish();

  // Reads what `fd` has now, at most `max_chunks` reads of 64 KiB, without
  // blocking, and forwards it. Returns false once the stream has ended (EOF
  // or a read error), after calling Finish(). The bound keeps one chatty rank
  // from starving the others or delaying the launcher's reaction to a death.
  bool ReadFrom(int fd, int max_chunks = 4);

  // The last lines forwarded, oldest first, without prefix or newline.
  const std::deque<std::string>& tail() const { return tail_; }

 private:
  void Emit(absl::string_view line);

  std::string prefix_;
  int out_fd_;
  size_t tail_lines_;
  std::string pending_;  // bytes after the last newline
  std::deque<std::string> tail_;
};

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_OUTPUT_H_
