// backend.h: choosing the backend and interposers from options and env.
#ifndef SYNCLINE_CORE_SRC_BACKEND_H_
#define SYNCLINE_CORE_SRC_BACKEND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "syncline/types.h"

namespace syncline::internal {

// Resolves a SYNCLINE_BACKEND value for `device`: "gloo", "auto", or a map
// "cpu:gloo,cuda:nccl". auto means nccl for CUDA and gloo for CPU.
absl::StatusOr<std::string> ChooseBackend(const std::string& spec, Device device);

// Interposer names from a SYNCLINE_PLUGINS value ("trace,check"), plus
// "check" when SYNCLINE_DEBUG=detail.
std::vector<std::string> ChoosePlugins(const std::vector<std::string>& explicit_names);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_BACKEND_H_
