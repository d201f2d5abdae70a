// error.cc: syncline::ddp::Error and ThrowIfError (see error.h).
#include "syncline/ddp/error.h"

#include "absl/strings/str_cat.h"

namespace syncline::ddp {

// No backtrace: the message names the op, its sequence number and the ranks,
// which is what a user acts on; a C++ stack would bury it.
Error::Error(absl::StatusCode code, std::string message)
    : c10::Error(std::move(message), /*backtrace=*/""), code_(code) {}

Error::~Error() = default;

void ThrowIfError(const absl::Status& status, const std::string& what) {
  if (status.ok()) return;
  throw Error(status.code(),
              absl::StrCat("syncline::ddp: ", what, ": ", status.ToString()));
}

}  // namespace syncline::ddp
