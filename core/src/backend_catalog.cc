// backend_catalog.cc: see backend_catalog.h.
#include "backend_catalog.h"

#include "absl/strings/str_join.h"

namespace syncline::internal {
namespace {

struct KnownBackend {
  const char* name;
  bool cuda;          // moves CUDA buffers (else CPU buffers)
  bool auto_default;  // what SYNCLINE_BACKEND=auto picks for that device
};

// The one list. Keep it in the order messages should name them.
constexpr KnownBackend kBackends[] = {
    {"gloo", false, true},
    {"ucx", false, false},
    {"nccl", true, true},
};

}  // namespace

const std::vector<std::string>& KnownBackends() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const KnownBackend& b : kBackends) out.push_back(b.name);
    return out;
  }();
  return names;
}

const char* DefaultBackend(bool cuda) {
  for (const KnownBackend& b : kBackends) {
    if (b.cuda == cuda && b.auto_default) return b.name;
  }
  return kBackends[0].name;
}

std::string BackendsFor(bool cuda) {
  std::vector<std::string> names;
  for (const KnownBackend& b : kBackends) {
    if (b.cuda == cuda) names.push_back(b.name);
  }
  return absl::StrJoin(names, " or ");
}

}  // namespace syncline::internal
