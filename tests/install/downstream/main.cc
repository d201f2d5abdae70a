// A downstream program: one allreduce through the installed Syncline.
#include <cstdio>
#include <vector>

#include "absl/strings/str_join.h"
#include "syncline/communicator.h"
#include "syncline/diagnostics.h"

int main() {
  auto comm = syncline::Communicator::Create({});
  if (!comm.ok()) {
    std::fprintf(stderr, "downstream: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  std::vector<int32_t> x(1000, (*comm)->rank() + 1);
  auto work = (*comm)->Allreduce(syncline::View(x));
  absl::Status st = work.ok() ? (*work)->Wait() : work.status();
  if (!st.ok()) {
    std::fprintf(stderr, "downstream: %s\n", st.ToString().c_str());
    return 1;
  }
  const int n = (*comm)->size();
  const bool ok = x[0] == n * (n + 1) / 2;
  std::printf("downstream rank %d/%d over %s: %s; plugin search path %s\n", (*comm)->rank(),
              n, (*comm)->backend_name().c_str(), ok ? "OK" : "WRONG",
              absl::StrJoin(syncline::PluginSearchPaths(), ":").c_str());
  return ok ? 0 : 1;
}
