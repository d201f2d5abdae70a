// backend.cc: SYNCLINE_BACKEND and SYNCLINE_PLUGINS parsing.
#include "backend.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend_catalog.h"
#include "syncline/env.h"

namespace syncline::internal {

absl::StatusOr<std::string> ChooseBackend(const std::string& raw, Device device) {
  std::string spec = absl::AsciiStrToLower(absl::StripAsciiWhitespace(raw));
  if (spec.empty()) spec = EnvString("SYNCLINE_BACKEND");
  const char* device_key = device.is_cuda() ? "cuda" : "cpu";
  if (spec.find(':') != std::string::npos) {
    for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(entry, ':');
      if (kv.second.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SYNCLINE_BACKEND='", raw, "': entry '", entry,
            "' has no backend; write e.g. cpu:gloo,cuda:nccl"));
      }
      if (kv.first != "cpu" && kv.first != "cuda") {
        return absl::InvalidArgumentError(absl::StrCat(
            "SYNCLINE_BACKEND='", raw, "': unknown device '", kv.first,
            "'; use cpu or cuda"));
      }
      if (kv.first == device_key) return kv.second == "auto" ? ChooseBackend("auto", device) : kv.second;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "SYNCLINE_BACKEND='", raw, "' names no backend for ", device_key,
        " buffers; add e.g. ", device_key, ":", DefaultBackend(device.is_cuda())));
  }
  if (spec == "auto") return std::string(DefaultBackend(device.is_cuda()));
  return spec;
}

std::vector<std::string> ChoosePlugins(const std::vector<std::string>& explicit_names) {
  std::vector<std::string> names = explicit_names;
  if (names.empty()) {
    for (absl::string_view n :
         absl::StrSplit(EnvString("SYNCLINE_PLUGINS"), ',', absl::SkipEmpty())) {
      names.emplace_back(absl::StripAsciiWhitespace(n));
    }
  }
  if (EnvString("SYNCLINE_DEBUG") == "detail" &&
      std::find(names.begin(), names.end(), "check") == names.end()) {
    names.push_back("check");
  }
  return names;
}

}  // namespace syncline::internal
