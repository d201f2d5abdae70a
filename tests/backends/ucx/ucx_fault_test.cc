// UCX-specific failure behaviour: a rank SIGKILLed in the middle of a large
// allreduce must surface on every other rank as a peer failure
// (SL_ERR_PEER, absl kUnavailable) that names the op, its sequence number
// and the dead rank, well within the op timeout. Over shared memory the
// death is seen through the peer's pidfd, over tcp through UCX's endpoint
// error; both must be fast, not the timeout.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/store.h"

namespace syncline::testing {
namespace {

class UcxKill : public ::testing::TestWithParam<int> {};

TEST_P(UcxKill, KilledRankIsAPeerFailureWithinTheTimeout) {
  const int world_size = GetParam();
  constexpr int kVictim = 1;
  constexpr size_t kCount = (size_t{32} << 20) / sizeof(float);
  const absl::Duration op_timeout = absl::Seconds(20);
  RunOptions run;
  run.timeout = absl::Seconds(120);
  auto results = RunRanks(
      world_size,
      [&](int rank, int) {
        CommunicatorOptions options;
        options.backend = "ucx";
        options.timeout = absl::Seconds(60);
        auto comm = Communicator::Create(options);
        ASSERT_TRUE(comm.ok()) << comm.status();
        std::shared_ptr<Store> job = ConnectJobStore();
        ASSERT_NE(job, nullptr);
        std::vector<float> data(kCount, 1.0f);
        for (int iteration = 0; iteration < 50; ++iteration) {
          const uint64_t seq = (*comm)->next_seq();
          AllreduceOptions o;
          o.timeout = op_timeout;
          auto work = (*comm)->Allreduce(View(data), o);
          ASSERT_TRUE(work.ok()) << work.status();
          if (iteration == 2 && rank != kVictim) {
            // Tell the victim this rank has posted the op it will die in.
            ASSERT_TRUE(job->Set(absl::StrCat("ucx_fault_test/posted/", rank), "1").ok());
          }
          if (rank == kVictim && iteration == 2) {
            // Die once every rank has posted: the transfer is under way.
            std::vector<std::string> posted;
            for (int r = 0; r < world_size; ++r) {
              if (r != kVictim) posted.push_back(absl::StrCat("ucx_fault_test/posted/", r));
            }
            ASSERT_TRUE(job->Wait(posted, absl::Seconds(60)).ok());
            raise(SIGKILL);
          }
          const absl::Time start = absl::Now();
          const absl::Status status = (*work)->Wait(op_timeout + absl::Seconds(30));
          const absl::Duration took = absl::Now() - start;
          if (status.ok()) continue;
          std::printf("rank %d: iteration %d failed after %s: %s\n", rank, iteration,
                      absl::FormatDuration(took).c_str(), status.ToString().c_str());
          std::fflush(stdout);
          EXPECT_NE(rank, kVictim);
          EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
          EXPECT_LT(took, op_timeout / 2) << "detected by the timeout, not the death";
          EXPECT_TRUE(absl::StrContains(status.message(), "allreduce #" + std::to_string(seq)))
              << status;
          EXPECT_TRUE(absl::StrContains(status.message(), "rank " + std::to_string(kVictim)))
              << status;
          // The communicator stays failed: the next collective fails at once.
          auto next = (*comm)->Allreduce(View(data), o);
          EXPECT_TRUE(!next.ok() || !(*next)->Wait(absl::Seconds(5)).ok());
          return;
        }
        ADD_FAILURE() << "rank " << rank << " never saw the victim die";
      },
      run);
  ASSERT_EQ(results.size(), static_cast<size_t>(world_size));
  for (const RankResult& r : results) {
    if (r.rank == kVictim) {
      EXPECT_EQ(r.signal, SIGKILL) << r.output;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_TRUE(absl::StrContains(r.output, "failed after")) << r.output;
    }
    std::printf("--- rank %d (%.2f s):\n%s", r.rank, r.seconds, r.output.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxKill, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace syncline::testing
