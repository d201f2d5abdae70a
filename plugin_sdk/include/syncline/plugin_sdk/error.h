// error.h: filling sl_error_t and keeping C++ exceptions inside a plugin.
//
// Every entry point of a backend's sl_backend_t table runs its body
// through SlGuard(), which turns an escaped exception into SL_ERR_INTERNAL
// with the exception's text, because an exception crossing the C ABI would
// terminate the host process. SlSetError() is the one way to write a
// message, so messages are always NUL-terminated and truncated, never
// overflowed.
//
// Thread safety: stateless; call from any thread.
//
// Example:
//   sl_result_t Post(sl_comm_t* c, const sl_op_t* op, sl_request_t** r,
//                    sl_error_t* err) {
//     return SlGuard(err, "gloo post", [&] { return Impl(c)->Post(*op, r, err); });
//   }
#ifndef SYNCLINE_PLUGIN_SDK_ERROR_H_
#define SYNCLINE_PLUGIN_SDK_ERROR_H_

#include <cstdarg>
#include <cstdio>
#include <exception>
#include <new>

#include <string>

#include "syncline/plugin_abi.h"

namespace syncline::backend {

// SlSetError()
//
// printf-style; a null `err` is allowed and ignored. Returns `code` so that
// call sites can `return SlSetError(err, SL_ERR_..., "...", ...);`.
__attribute__((format(printf, 3, 4))) inline sl_result_t SlSetError(sl_error_t* err,
                                                                    sl_result_t code,
                                                                    const char* format,
                                                                    ...) {
  if (err != nullptr) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(err->message, sizeof(err->message), format, args);
    va_end(args);
  }
  return code;
}

// SlClearError()
//
// Writes an empty message, for calls that succeed.
inline void SlClearError(sl_error_t* err) {
  if (err != nullptr) err->message[0] = '\0';
}

// SlReport()
//
// A finished request's outcome through the ABI: clears `err` on success,
// copies `message` into it otherwise, and returns `code`.
inline sl_result_t SlReport(sl_error_t* err, sl_result_t code, const std::string& message) {
  if (code == SL_OK) {
    SlClearError(err);
  } else {
    SlSetError(err, code, "%s", message.c_str());
  }
  return code;
}

// SlGuard()
//
// Runs `body` (returning sl_result_t) and converts any exception it throws
// into SL_ERR_INTERNAL (or SL_ERR_UNAVAILABLE for std::bad_alloc) with a
// message that starts with `what` (e.g. "gloo comm_create").
template <typename Body>
sl_result_t SlGuard(sl_error_t* err, const char* what, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return SlSetError(err, SL_ERR_UNAVAILABLE, "%s: out of memory", what);
  } catch (const std::exception& e) {
    return SlSetError(err, SL_ERR_INTERNAL, "%s: unexpected exception: %s", what,
                      e.what());
  } catch (...) {
    return SlSetError(err, SL_ERR_INTERNAL, "%s: unexpected exception of unknown type",
                      what);
  }
}

// SlGuardVoid()
//
// For the table's void entries (comm_destroy, request_free): an exception
// there has nowhere to go, so it is reported on stderr and swallowed.
template <typename Body>
void SlGuardVoid(const char* what, Body&& body) noexcept {
  try {
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "syncline: %s: unexpected exception: %s\n", what, e.what());
  } catch (...) {
    std::fprintf(stderr, "syncline: %s: unexpected exception\n", what);
  }
}

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_ERROR_H_
