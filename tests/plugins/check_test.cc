// The check interposer over gloo: mismatched collectives fail on every rank,
// fast, with a message that names who called what; and without check, a
// mismatched collective still ends in an error on every rank, not a crash.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "plugins/plugin_test_util.h"

namespace syncline::testing {
namespace {

// Every rank does one good allreduce (seq 1), then `mismatched` (seq 2).
// Returns the status of seq 2 and how long it took.
template <typename Mismatched>
absl::Status GoodThenMismatched(Communicator& comm, Mismatched mismatched,
                                absl::Duration* took) {
  std::vector<float> ones(64, 1.0f);
  absl::Duration first;
  absl::Status ok = PostAndWait([&] { return comm.Allreduce(View(ones)); }, &first);
  EXPECT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(ones[63], static_cast<float>(comm.size())) << "check changed the result";
  return PostAndWait(mismatched, took);
}

TEST(CheckPlugin, AllreduceAgainstBroadcastFailsEveryRankFast) {
  auto results = RunRanks(
      3,
      [](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        std::vector<float> big(4096, 1.0f), small(1024, 1.0f);
        absl::Duration took;
        absl::Status status = GoodThenMismatched(
            *comm,
            [&] {
              return rank == 2 ? comm->Broadcast(View(small), BroadcastOptions{})
                               : comm->Allreduce(View(big));
            },
            &took);
        Note(rank, "mismatched op #2", status, took);
        EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
        EXPECT_TRUE(
            absl::StrContains(status.message(),
                              "op #2: ranks 0,1 called allreduce (f32 x 4096, sum); "
                              "rank 2 called broadcast (f32 x 1024, root 0)"))
            << status;
        EXPECT_LT(took, absl::Seconds(1));
        // The communicator stays desynchronized: the next op fails at once.
        absl::Status next = PostAndWait([&] { return comm->Barrier(); }, &took);
        EXPECT_EQ(next.code(), absl::StatusCode::kFailedPrecondition) << next;
        EXPECT_TRUE(absl::StrContains(next.message(), "earlier desync")) << next;
      },
      PluginRun("check", 30));
  ExpectAllSucceeded(results);
}

// SYNCLINE_DEBUG=detail turns check on with SYNCLINE_PLUGINS unset.
TEST(CheckPlugin, SizeMismatchFailsEveryRankUnderDebugDetail) {
  RunOptions run = PluginRun("", 30, {{"SYNCLINE_DEBUG", "detail"}});
  auto results = RunRanks(
      2,
      [](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        std::vector<float> data(rank == 0 ? 1000 : 1001, 1.0f);
        absl::Duration took;
        absl::Status status = GoodThenMismatched(
            *comm, [&] { return comm->Allreduce(View(data)); }, &took);
        Note(rank, "mismatched op #2", status, took);
        EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
        EXPECT_TRUE(absl::StrContains(status.message(),
                                      "op #2: rank 0 called allreduce (f32 x 1000, sum); "
                                      "rank 1 called allreduce (f32 x 1001, sum)"))
            << status;
        EXPECT_LT(took, absl::Seconds(1));
      },
      run);
  ExpectAllSucceeded(results);
}

TEST(CheckPlugin, NanScanNamesTheRankAndOp) {
  auto results = RunRanks(
      2,
      [](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        std::vector<float> data(100, 1.0f);
        if (rank == 1) data[7] = std::nanf("");
        absl::Duration took;
        absl::Status status = GoodThenMismatched(
            *comm, [&] { return comm->Allreduce(View(data)); }, &took);
        Note(rank, "op #2 with a NaN on rank 1", status, took);
        EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
        EXPECT_TRUE(
            absl::StrContains(status.message(), "op #2: allreduce (f32 x 100, sum)"))
            << status;
        EXPECT_TRUE(absl::StrContains(status.message(),
                                      "rank 1's input holds NaN (first at element 7)"))
            << status;
      },
      PluginRun("check", 30, {{"SYNCLINE_CHECK_NAN", "1"}}));
  ExpectAllSucceeded(results);
}

// check must not make Post() block on peers: here rank 1 can reach the
// allreduce on `a` only after rank 0's send on `b`, which rank 0 posts after
// its allreduce. Blocking in Post() would deadlock until the op timeout.
TEST(CheckPlugin, PostDoesNotBlockOnPeers) {
  auto results = RunRanks(
      2,
      [](int rank, int) {
        auto a = Connect();
        auto b = Connect();
        ASSERT_TRUE(a != nullptr && b != nullptr);
        std::vector<float> data(100, 1.0f);
        std::vector<int32_t> msg(4, rank == 0 ? 7 : 0);
        const absl::Time start = absl::Now();
        if (rank == 0) {
          auto reduce = a->Allreduce(View(data));
          ASSERT_TRUE(reduce.ok()) << reduce.status();
          auto send = b->Send(View(msg), 1);
          ASSERT_TRUE(send.ok()) << send.status();
          EXPECT_TRUE((*send)->Wait(absl::Seconds(20)).ok());
          EXPECT_TRUE((*reduce)->Wait(absl::Seconds(20)).ok());
        } else {
          auto recv = b->Recv(View(msg), 0);
          ASSERT_TRUE(recv.ok()) << recv.status();
          EXPECT_TRUE((*recv)->Wait(absl::Seconds(20)).ok());
          EXPECT_EQ(msg[3], 7);
          auto reduce = a->Allreduce(View(data));
          ASSERT_TRUE(reduce.ok()) << reduce.status();
          EXPECT_TRUE((*reduce)->Wait(absl::Seconds(20)).ok());
        }
        EXPECT_EQ(data[99], 2.0f);
        EXPECT_LT(absl::Now() - start, absl::Seconds(5));
      },
      PluginRun("check", 10));
  ExpectAllSucceeded(results);
}

// A rank that never reaches the collective: the others' fingerprint
// exchange times out, and the error says what check was waiting for.
TEST(CheckPlugin, RankThatSkipsACollectiveFailsTheOthersWithinTheTimeout) {
  auto results = RunRanks(
      2,
      [](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        if (rank == 1) {
          absl::SleepFor(absl::Seconds(4));
          return;
        }
        std::vector<float> data(100, 1.0f);
        absl::Duration took;
        absl::Status status =
            PostAndWait([&] { return comm->Allreduce(View(data)); }, &took);
        Note(rank, "allreduce #1 without rank 1", status, took);
        EXPECT_FALSE(status.ok());
        EXPECT_TRUE(absl::StrContains(status.message(), "allreduce #1")) << status;
        EXPECT_TRUE(absl::StrContains(status.message(), "fingerprint exchange for op #1"))
            << status;
        EXPECT_TRUE(
            absl::StrContains(status.message(), "check interposer could not compare"))
            << status;
        EXPECT_LT(took, absl::Seconds(3 + 2));
      },
      PluginRun("check", 3));
  ExpectAllSucceeded(results);
}

// Without check, the backend alone must turn a mismatch into an error that
// names the op on every rank within the op timeout (3 s), never a crash.
// (RunRanks re-runs the whole test body in each child, so each scenario is
// its own test.)
void RunMismatchWithoutCheck(bool size_mismatch) {
  auto results = RunRanks(
      2,
      [&](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        std::vector<float> data(rank == 0 || !size_mismatch ? 1000 : 1001, 1.0f);
        absl::Duration took;
        absl::Status status = GoodThenMismatched(
            *comm,
            [&] {
              return rank == 1 && !size_mismatch
                         ? comm->Broadcast(View(data), BroadcastOptions{})
                         : comm->Allreduce(View(data));
            },
            &took);
        Note(rank, "mismatched op #2 without check", status, took);
        EXPECT_FALSE(status.ok()) << "a mismatched collective reported success";
        EXPECT_TRUE(absl::StrContains(status.message(), "#2")) << status;
        EXPECT_LT(took, absl::Seconds(3 + 2));
      },
      PluginRun("", 3));
  for (const RankResult& r : results) {
    EXPECT_EQ(r.signal, 0) << "rank " << r.rank << " crashed:\n" << r.output;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
  }
  ExpectAllSucceeded(results);
}

TEST(CheckPlugin, WithoutCheckSizeMismatchEndsInErrorsNotCrashes) {
  RunMismatchWithoutCheck(/*size_mismatch=*/true);
}

TEST(CheckPlugin, WithoutCheckAllreduceAgainstBroadcastEndsInErrorsNotCrashes) {
  RunMismatchWithoutCheck(/*size_mismatch=*/false);
}

}  // namespace
}  // namespace syncline::testing
