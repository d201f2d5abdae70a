// error.h: the one exception type of syncline::ddp.
//
// The core and the backends return absl::Status; the DDP layer is the
// libtorch edge, where errors are exceptions. The rule:
//   * Everything syncline::ddp throws is a syncline::ddp::Error, which
//     derives from c10::Error, so `catch (const c10::Error&)` (and
//     `catch (const std::exception&)`) in a libtorch program catches it along
//     with libtorch's own errors (TORCH_CHECK).
//   * Its code() is an absl::StatusCode: a failed collective carries the
//     core's code (kDeadlineExceeded for a timeout, kUnavailable for a peer
//     that went away, ...); a bad argument is kInvalidArgument; a call at the
//     wrong time (nested Join(), a second backward over one forward, a
//     parameter that got no gradient) is kFailedPrecondition.
//   * what() is the whole message a person acts on: "syncline::ddp: ", what
//     was being done, the status code's name and the core's message (the op,
//     its sequence number, the ranks involved). It carries no backtrace.
// Errors that libtorch itself raises inside the wrapped model's forward or
// backward pass through unchanged (c10::Error as well).
//
// Example:
//   try {
//     loss.backward();
//   } catch (const syncline::ddp::Error& e) {
//     if (e.code() == absl::StatusCode::kDeadlineExceeded) { ... }
//   } catch (const c10::Error& e) { ... }  // libtorch's own
#ifndef SYNCLINE_DDP_ERROR_H_
#define SYNCLINE_DDP_ERROR_H_

#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::ddp {

// Error
//
// A c10::Error with the absl::StatusCode of what failed. Construct it with
// the full message; what() returns the message alone.
class Error : public c10::Error {
 public:
  Error(absl::StatusCode code, std::string message);
  ~Error() override;

  // The message (and any c10 context added to it), without the trailing
  // newline and backtrace that c10::Error::what() appends.
  const char* what() const noexcept override { return what_without_backtrace(); }

  absl::StatusCode code() const { return code_; }
  // The status the error stands for: code() and the message.
  absl::Status status() const { return absl::Status(code_, msg()); }

 private:
  absl::StatusCode code_;
};

// ThrowIfError()
//
// Converts a core error into Error with the status's code and the message
// "syncline::ddp: <what>: <CODE>: <core's message>"; does nothing when
// `status` is OK. The StatusOr form returns the value.
//   std::shared_ptr<syncline::Communicator> comm = syncline::ddp::ThrowIfError(
//       syncline::Communicator::Create({}), "connect");
void ThrowIfError(const absl::Status& status, const std::string& what);
template <typename T>
T ThrowIfError(absl::StatusOr<T> value, const std::string& what) {
  ThrowIfError(value.status(), what);
  return std::move(value).value();
}

}  // namespace syncline::ddp

#pragma GCC visibility pop

#endif  // SYNCLINE_DDP_ERROR_H_
