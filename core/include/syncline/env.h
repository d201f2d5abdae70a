// env.h: the one table of Syncline's own environment options.
//
// Every SYNCLINE_* variable is declared here, with its default and a doc
// string. `syncline-run --help-env` prints this table and a test checks that
// the README lists the same options. Transport knobs (UCX_*, NCCL_*, GLOO_*)
// pass through untouched and are not listed.
//
// Example:
//   absl::StatusOr<absl::Duration> t = syncline::EnvSeconds("SYNCLINE_TIMEOUT");
#ifndef SYNCLINE_ENV_H_
#define SYNCLINE_ENV_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

struct EnvOption {
  const char* name;
  const char* default_value;  // as a string; "" when unset means "none"
  const char* doc;
};

// The full table, in display order.
const std::vector<EnvOption>& EnvOptions();

// The value of a declared option, or its default. Aborts if `name` is not in
// the table (a programming error).
std::string EnvString(absl::string_view name);

// Integer / duration (seconds, may be fractional) forms. A malformed value is
// an InvalidArgument error naming the variable and the value; so is an
// integer below `min_value`, and a duration that is not finite and positive
// ("nan", "inf", "0", "-1", "1e400": none of them may mean "no deadline").
absl::StatusOr<int64_t> EnvInt(absl::string_view name,
                               int64_t min_value = std::numeric_limits<int64_t>::min());
absl::StatusOr<absl::Duration> EnvSeconds(absl::string_view name);

// The table formatted for a terminal (--help-env) or as a markdown table.
std::string FormatEnvTable(bool markdown);

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_ENV_H_
