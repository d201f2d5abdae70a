// store_util.h: helpers shared by the Store implementations.
#ifndef SYNCLINE_CORE_SRC_STORE_UTIL_H_
#define SYNCLINE_CORE_SRC_STORE_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "syncline/status.h"

namespace syncline::internal_store {

// "timed out after 5s waiting for keys [a, b] in <where>"; lists at most 16.
inline absl::Status MissingKeysError(const std::string& where,
                                     const std::vector<std::string>& missing,
                                     absl::Duration waited) {
  std::vector<std::string> shown(
      missing.begin(), missing.begin() + std::min<size_t>(missing.size(), 16));
  return absl::DeadlineExceededError(absl::StrFormat(
      "timed out after %s waiting for %d key(s) in %s: [%s]%s",
      absl::FormatDuration(waited), missing.size(), where,
      absl::StrJoin(shown, ", "), missing.size() > shown.size() ? " ..." : ""));
}

}  // namespace syncline::internal_store

#endif  // SYNCLINE_CORE_SRC_STORE_UTIL_H_
