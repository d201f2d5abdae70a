// ucx_sweep: the measurement behind the UCX backend's algorithm thresholds
// (algorithms/select.cc). Not a test: a disabled gtest, so it can reuse
// RunRanks, that prints a table in the nccl-tests style. It skips unless
// RUN_UCX_SWEEP=1 (a variable, not a flag, so the re-executed ranks see it):
//
//   RUN_UCX_SWEEP=1 UCX_TLS=posix,sysv,cma,self bin/ucx_sweep
//   RUN_UCX_SWEEP=1 UCX_TLS=tcp UCX_NET_DEVICES=lo bin/ucx_sweep
//
// For each size, allreduce (f32, sum, 2 ranks, through the public API
// including Wait) runs with each algorithm forced, and the median time per
// op is printed with algbw and busbw = algbw * 2(n-1)/n. Rank 0 also times
// the memory-bandwidth bound of a 2-rank reduce-scatter + allgather: one
// reduction and one copy of N/2 bytes (t_sum(N/2) + t_copy(N/2)).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::testing {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median microseconds of `reps` allreduces of `count` floats.
double TimeAllreduce(Communicator& comm, size_t count, int reps) {
  std::vector<float> data(count, 1.0f);
  std::vector<double> us;
  for (int i = 0; i < reps + 3; ++i) {
    const auto start = Clock::now();
    auto work = comm.Allreduce(View(data));
    if (!work.ok() || !(*work)->Wait(absl::Seconds(60)).ok()) return -1;
    const double t = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= 3) us.push_back(t);
  }
  return Median(us);
}

double MemoryBoundUs(size_t bytes) {
  const size_t half = bytes / 2 / sizeof(float);
  std::vector<float> a(half, 1.0f), b(half, 2.0f), c(half);
  std::vector<double> us;
  for (int i = 0; i < 7; ++i) {
    const auto start = Clock::now();
    backend::SlReduce3(c.data(), a.data(), b.data(), half, SL_F32, SL_SUM);
    std::memcpy(a.data(), c.data(), half * sizeof(float));
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  return Median(us);
}

// One test per forced algorithm: RunRanks re-executes this test in each
// rank, so one test must start exactly one group.
class UcxSweep : public ::testing::TestWithParam<const char*> {};

TEST_P(UcxSweep, Allreduce) {
  if (std::getenv("RUN_UCX_SWEEP") == nullptr) GTEST_SKIP() << "set RUN_UCX_SWEEP=1";
  const char* tls = std::getenv("UCX_TLS");
  const std::string algo = GetParam();
  const std::string backend_options = algo == "rd"     ? "allreduce_small_max=1g"
                                      : algo == "ring" ? "allreduce_small_max=0"
                                                       : "";
  const char* extra = std::getenv("RUN_UCX_SWEEP_OPTIONS");  // e.g. chunk_bytes=1m
  RunOptions run;
  run.timeout = absl::Seconds(600);
  auto results = RunRanks(
      2,
      [&](int rank, int) {
        CommunicatorOptions options;
        options.backend = "ucx";
        options.backend_options =
            backend_options + (extra != nullptr ? std::string(";") + extra : "");
        auto comm = Communicator::Create(options);
        ASSERT_TRUE(comm.ok()) << comm.status();
        if (rank == 0) {
          std::printf("# UCX_TLS=%s algorithm=%s options=%s\n%12s %12s %10s %10s %10s %10s\n",
                      tls ? tls : "<unset>", algo.c_str(), options.backend_options.c_str(),
                      "bytes", "time_us", "algbw", "busbw", "bound_us", "of_bound");
        }
        for (size_t bytes : {size_t{8}, size_t{64}, size_t{512}, size_t{4} << 10,
                             size_t{16} << 10, size_t{64} << 10, size_t{256} << 10,
                             size_t{1} << 20, size_t{4} << 20, size_t{16} << 20,
                             size_t{64} << 20}) {
          const char* max = std::getenv("RUN_UCX_SWEEP_MAX_BYTES");
          if (max != nullptr && bytes > std::strtoull(max, nullptr, 10)) break;
          const size_t count = std::max<size_t>(1, bytes / sizeof(float));
          const int reps = bytes <= (64 << 10) ? 2000 : bytes <= (4 << 20) ? 60 : 12;
          const double us = TimeAllreduce(**comm, count, reps);
          if (rank == 0) {
            const double algbw = bytes / us / 1e3;  // GB/s; busbw = algbw for 2 ranks
            const double bound = bytes >= 4096 ? MemoryBoundUs(bytes) : 0;
            std::printf("%12zu %12.2f %10.3f %10.3f %10.1f %9.0f%%\n", bytes, us, algbw,
                        algbw, bound, bound > 0 ? 100.0 * bound / us : 0.0);
            std::fflush(stdout);
          }
        }
      },
      run);
  for (const auto& r : results) {
    if (r.rank == 0) std::printf("%s", r.output.c_str());
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, UcxSweep, ::testing::Values("rd", "ring", "auto"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace syncline::testing
