// syncline-allreduce-example: the smallest complete Syncline program.
//
// Every rank contributes a vector of `--count` floats, all equal to rank + 1,
// and allreduces it with sum. Each element must then equal
// 1 + 2 + ... + size = size * (size + 1) / 2, an exact float for any
// realistic world size, so the check is exact. The backend comes from
// SYNCLINE_BACKEND (default auto); rank and size from the launcher's
// environment, or rank 0 of 1 when run alone.
//
//   syncline-run -n 4 -- syncline-allreduce-example
//   [rank 0] rank 0/4: allreduce over gloo of 1048576 floats: OK (each element = 10)
//
// Any failure (no such backend, a peer that died, a wrong result) prints the
// error on stderr and exits 1. `--iters` repeats the allreduce, which keeps
// the ranks inside collectives for a while (the launcher's tests kill a rank
// meanwhile).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "syncline/communicator.h"
#include "syncline/status.h"
#include "syncline/types.h"

ABSL_FLAG(int64_t, count, 1 << 20, "Floats per rank.");
ABSL_FLAG(int, iters, 1, "How many times to allreduce (and check).");

namespace {

// Allreduces `data` once and checks every element against the oracle. The
// buffer is refilled each time: an in-place allreduce overwrites it.
absl::Status AllreduceOnce(syncline::Communicator& comm, std::vector<float>& data,
                           float expected) {
  std::fill(data.begin(), data.end(), static_cast<float>(comm.rank() + 1));
  uint64_t seq = comm.next_seq();
  SL_ASSIGN_OR_RETURN(std::unique_ptr<syncline::Work> work,
                      comm.Allreduce(syncline::View(data)));
  SL_RETURN_IF_ERROR(work->Wait());
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != expected) {
      return absl::DataLossError(absl::StrFormat(
          "allreduce #%d: element %d is %g, expected %g (the sum of rank+1 "
          "over %d ranks)",
          seq, i, data[i], expected, comm.size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Allreduces a vector across all ranks and checks the sum.\n"
      "  syncline-run -n 4 -- syncline-allreduce-example [--count N] "
      "[--iters K]");
  absl::FlagsUsageConfig usage;  // --help: list this file's flags
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "allreduce/allreduce.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  int64_t count = absl::GetFlag(FLAGS_count);
  int iters = absl::GetFlag(FLAGS_iters);
  if (count < 1 || iters < 1) {
    std::fprintf(stderr, "--count and --iters must be at least 1\n");
    return 2;
  }

  absl::StatusOr<std::unique_ptr<syncline::Communicator>> created =
      syncline::Communicator::Create({});
  if (!created.ok()) {
    std::fprintf(stderr, "syncline-allreduce-example: %s\n",
                 created.status().ToString().c_str());
    return 1;
  }
  syncline::Communicator& comm = **created;
  const int size = comm.size();
  const float expected = static_cast<float>(size * (size + 1) / 2);

  std::vector<float> data(static_cast<size_t>(count));
  for (int i = 0; i < iters; ++i) {
    absl::Status s = AllreduceOnce(comm, data, expected);
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d/%d: allreduce over %s failed: %s\n", comm.rank(),
                   size, comm.backend_name().c_str(), s.ToString().c_str());
      return 1;
    }
  }
  std::printf(
      "rank %d/%d: allreduce over %s of %lld floats%s: OK (each "
      "element = %g)\n",
      comm.rank(), size, comm.backend_name().c_str(), static_cast<long long>(count),
      iters > 1 ? absl::StrFormat(" x %d iterations", iters).c_str() : "", expected);
  std::fflush(stdout);
  return 0;
}
