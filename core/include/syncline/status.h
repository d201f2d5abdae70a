// status.h: error handling helpers on top of absl::Status.
//
// Core and backends return absl::Status / absl::StatusOr. These macros keep
// call sites short:
//
//   absl::Status Connect() {
//     SL_RETURN_IF_ERROR(store.Set("k", "v"));
//     SL_ASSIGN_OR_RETURN(std::string v, store.Get("k", absl::Seconds(5)));
//     ...
//   }
#ifndef SYNCLINE_STATUS_H_
#define SYNCLINE_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SL_STATUS_CONCAT_INNER_(a, b) a##b
#define SL_STATUS_CONCAT_(a, b) SL_STATUS_CONCAT_INNER_(a, b)

// SL_RETURN_IF_ERROR(expr)
//
// Evaluates an expression yielding absl::Status and returns it if not OK.
#define SL_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::absl::Status sl_status_ = (expr);          \
    if (!sl_status_.ok()) return sl_status_;     \
  } while (0)

// SL_ASSIGN_OR_RETURN(lhs, expr)
//
// Evaluates an absl::StatusOr<T>; on error returns its status, otherwise
// moves the value into `lhs` (which may be a declaration).
#define SL_ASSIGN_OR_RETURN(lhs, expr) \
  SL_ASSIGN_OR_RETURN_IMPL_(SL_STATUS_CONCAT_(sl_statusor_, __LINE__), lhs, expr)
#define SL_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr) \
  auto var = (expr);                              \
  if (!var.ok()) return var.status();             \
  lhs = std::move(var).value()

// SL_CHECK(cond, msg)
//
// A broken invariant: prints the message and aborts. Not for user errors.
#define SL_CHECK(cond, msg)                                             \
  do {                                                                  \
    if (!(cond)) ::syncline::internal::CheckFailed(__FILE__, __LINE__,  \
                                                   #cond, (msg));       \
  } while (0)

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond,
                              const char* msg);
}  // namespace syncline::internal

#pragma GCC visibility pop

#endif  // SYNCLINE_STATUS_H_
