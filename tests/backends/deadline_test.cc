// deadline_test.cc: an op's timeout counts from when it can start (the op
// before it has finished on this rank), not from when it was posted; a
// queue of quick ops longer than the timeout must not time out, and a truly
// stuck op still must (issue 13).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/backend_params.h"
#include "backends/collective_util.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

constexpr absl::Duration kOpTimeout = absl::Seconds(2);

// Posts one allreduce with the op timeout per buffer, in order; before each
// one it calls `pace`.
template <typename T, typename Pace>
std::vector<std::unique_ptr<Work>> PostAll(Communicator& comm,
                                           std::vector<std::vector<T>>& buffers, Pace pace) {
  AllreduceOptions options;
  options.timeout = kOpTimeout;
  std::vector<std::unique_ptr<Work>> works;
  for (auto& buffer : buffers) {
    pace();
    auto work = comm.Allreduce(View(buffer), options);
    EXPECT_TRUE(work.ok()) << work.status();
    if (!work.ok()) break;
    works.push_back(std::move(work).value());
  }
  return works;
}

class DeadlineTest : public ::testing::TestWithParam<BackendCase> {};

// Rank 0 posts every op at once; the others post one op every 100 ms, so
// rank 0's op #k ends about k x 100 ms after it was posted, but only about
// 100 ms after its turn came. 40 ops take 4 s, twice the 2 s op timeout:
// counted from posting, the later ops time out; counted from their turn,
// none comes near it (a gap would have to stretch 20-fold to fail).
TEST_P(DeadlineTest, QueuedOpsLongerThanTheTimeoutAllSucceed) {
  const std::string backend = GetParam().backend;
  constexpr int kOps = 40;
  RunOptions run;
  run.timeout = absl::Seconds(120);
  auto results = RunRanks(
      GetParam().world_size,
      [&](int rank, int size) {
        auto comm = ConnectForTest(backend, absl::Seconds(30));
        ASSERT_NE(comm, nullptr);
        std::vector<std::vector<int64_t>> data(kOps);
        for (int i = 0; i < kOps; ++i) data[i] = {rank + 1, i};
        const absl::Time start = absl::Now();
        auto works = PostAll(*comm, data, [&] {
          if (rank != 0) absl::SleepFor(absl::Milliseconds(100));
        });
        ASSERT_EQ(works.size(), data.size());
        for (int i = 0; i < kOps; ++i) {
          const absl::Status status = works[i]->Wait(absl::Seconds(60));
          ASSERT_TRUE(status.ok()) << "op " << i + 1 << " of " << kOps << " (posted "
                                   << absl::FormatDuration(absl::Now() - start)
                                   << " ago) failed: " << status;
          // Oracle: each rank contributed (rank + 1, i).
          EXPECT_EQ(data[i][0], static_cast<int64_t>(size) * (size + 1) / 2);
          EXPECT_EQ(data[i][1], static_cast<int64_t>(size) * i);
        }
        std::printf("rank %d: %d queued ops took %s\n", rank, kOps,
                    absl::FormatDuration(absl::Now() - start).c_str());
      },
      run);
  ExpectAllSucceeded(results);
}

// A rank that stops posting still fails the op it never joins, within its
// timeout from when that op's turn came, and the ops queued behind it fail
// too instead of hanging.
TEST_P(DeadlineTest, StuckOpBehindQuickOnesStillTimesOut) {
  const std::string backend = GetParam().backend;
  constexpr int kQuick = 5;
  RunOptions run;
  run.timeout = absl::Seconds(120);
  auto results = RunRanks(
      GetParam().world_size,
      [&](int rank, int) {
        auto comm = ConnectForTest(backend, absl::Seconds(30));
        ASSERT_NE(comm, nullptr);
        // Rank 1 stops after the quick ones.
        std::vector<std::vector<float>> data(rank == 1 ? kQuick : kQuick + 2,
                                             std::vector<float>(2, 1.0f));
        auto works = PostAll(*comm, data, [] {});
        ASSERT_EQ(works.size(), data.size());
        for (int i = 0; i < kQuick; ++i) ASSERT_TRUE(works[i]->Wait().ok());
        if (rank == 1) {
          absl::SleepFor(kOpTimeout + absl::Seconds(5));  // alive, but silent
          return;
        }
        const absl::Time start = absl::Now();
        const absl::Status stuck = works[kQuick]->Wait(absl::Seconds(60));
        const absl::Duration took = absl::Now() - start;
        const absl::Status behind = works[kQuick + 1]->Wait(absl::Seconds(60));
        std::printf("rank %d: stuck op after %s: %s\n", rank,
                    absl::FormatDuration(took).c_str(), stuck.ToString().c_str());
        ASSERT_FALSE(stuck.ok()) << "the op succeeded without rank 1";
        EXPECT_TRUE(absl::StrContains(stuck.message(), "#" + std::to_string(kQuick + 1)))
            << stuck;
        EXPECT_TRUE(absl::StrContains(stuck.message(), "timed out")) << stuck;
        // It did wait for its timeout (which counts from its turn, after the
        // quick ops had finished), and the op behind it failed as well.
        EXPECT_GE(took, kOpTimeout / 2) << stuck;
        EXPECT_FALSE(behind.ok()) << "an op behind the stuck one succeeded";
      },
      run);
  for (const RankResult& r : results) {
    EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeadlineTest, ::testing::ValuesIn(BackendCases({2, 3})),
                         BackendCaseName);

}  // namespace
}  // namespace syncline::testing
