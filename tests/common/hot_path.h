// hot_path.h: heap allocations per 8-byte allreduce on the calling thread,
// the count that the hot-path tests bound (ucx_hot_path_test, mpi_job_test;
// an allocation cost ~20 ns on that path, bench/README.md).
//
// It includes counting_new.h, which replaces operator new: include it from
// exactly one source file of a test binary.
//
// Example (in a rank's body):
//   const size_t n = CountEightByteAllreduceAllocations(*comm, rank, size, 1000);
//   EXPECT_LE(n, kMaxPerOp * 1000 + kMaxGrowth);
#ifndef SYNCLINE_TESTS_COMMON_HOT_PATH_H_
#define SYNCLINE_TESTS_COMMON_HOT_PATH_H_

#include "common/counting_new.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {

// Op `i` of the series: an in-place allreduce of two floats, waited for,
// its result checked against the sum of every rank's input computed here.
inline void EightByteAllreduce(Communicator& comm, int rank, int size, int i) {
  float x[2] = {static_cast<float>(rank + 1 + i % 7), static_cast<float>(2 * rank - i % 3)};
  auto work = comm.Allreduce(View(x, 2));
  ASSERT_TRUE(work.ok()) << work.status();
  const absl::Status waited = (*work)->Wait();
  ASSERT_TRUE(waited.ok()) << waited;
  float sum0 = 0, sum1 = 0;
  for (int r = 0; r < size; ++r) {
    sum0 += static_cast<float>(r + 1 + i % 7);
    sum1 += static_cast<float>(2 * r - i % 3);
  }
  ASSERT_EQ(x[0], sum0) << "op " << i;
  ASSERT_EQ(x[1], sum1) << "op " << i;
}

// The allocations this thread makes over `ops` such ops, after 100 uncounted
// ones (the path's caches and queues warm up). Stops at the first failed
// check.
inline size_t CountEightByteAllreduceAllocations(Communicator& comm, int rank, int size,
                                                 int ops) {
  constexpr int kWarmup = 100;
  for (int i = 0; i < kWarmup && !::testing::Test::HasFatalFailure(); ++i) {
    EightByteAllreduce(comm, rank, size, i);
  }
  allocations = 0;
  counting = true;
  for (int i = 0; i < ops && !::testing::Test::HasFatalFailure(); ++i) {
    EightByteAllreduce(comm, rank, size, kWarmup + i);
  }
  counting = false;
  return allocations;
}

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_COMMON_HOT_PATH_H_
