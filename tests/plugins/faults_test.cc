// The faults interposer over gloo: each SYNCLINE_FAULT kind does what it
// says, on the rank and op it names, and the other ranks end with a clear
// error within the op timeout (3 s here), never a hang.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "plugins/plugin_test_util.h"

namespace syncline::testing {
namespace {

constexpr int kTimeoutS = 3;

// Two allreduces (seq 1 and 2); returns the second's status and duration.
absl::Status TwoAllreduces(Communicator& comm, absl::Duration* took) {
  std::vector<float> data(256, 1.0f);
  absl::Duration first;
  absl::Status ok = PostAndWait([&] { return comm.Allreduce(View(data)); }, &first);
  EXPECT_TRUE(ok.ok()) << ok;
  return PostAndWait([&] { return comm.Allreduce(View(data)); }, took);
}

TEST(FaultsPlugin, DelayHoldsTheNamedOpOnTheNamedRank) {
  auto results = RunRanks(
      2,
      [](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        absl::Duration took;
        absl::Status status = TwoAllreduces(*comm, &took);
        Note(rank, "allreduce #2", status, took);
        EXPECT_TRUE(status.ok()) << status;
        // Rank 1 sleeps before posting; rank 0 waits for it inside the op.
        EXPECT_GE(took, absl::Milliseconds(1400));
        EXPECT_LT(took, absl::Milliseconds(1500 + 2000));
      },
      PluginRun("faults", 30, {{"SYNCLINE_FAULT", "delay:rank=1,op=2,ms=1500"}}));
  ExpectAllSucceeded(results);
  EXPECT_TRUE(
      absl::StrContains(results[1].output, "delaying allreduce #2 (f32 x 256, sum)"))
      << results[1].output;
}

TEST(FaultsPlugin, KillEndsTheRankAndTheOthersErrorInTime) {
  auto results = RunRanks(
      2,
      [](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        absl::Duration took;
        absl::Status status = TwoAllreduces(*comm, &took);
        Note(rank, "allreduce #2", status, took);  // rank 1 never gets here
        EXPECT_FALSE(status.ok());
        EXPECT_TRUE(absl::StrContains(status.message(), "#2")) << status;
        EXPECT_LT(took, absl::Seconds(kTimeoutS + 2));
      },
      PluginRun("faults", kTimeoutS, {{"SYNCLINE_FAULT", "kill:rank=1,op=2"}}));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].signal, SIGKILL) << results[1].output;
  EXPECT_TRUE(absl::StrContains(results[1].output, "killing this process"))
      << results[1].output;
  EXPECT_EQ(results[0].exit_code, 0) << results[0].output;
}

TEST(FaultsPlugin, CloseFailsTheOpHereAndThePeerSeesAFailure) {
  auto results = RunRanks(
      2,
      [](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        absl::Duration took;
        absl::Status status = TwoAllreduces(*comm, &took);
        Note(rank, "allreduce #2", status, took);
        ASSERT_FALSE(status.ok());
        EXPECT_TRUE(absl::StrContains(status.message(), "#2")) << status;
        EXPECT_LT(took, absl::Seconds(kTimeoutS + 2));
        if (rank == 0) {
          EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
          EXPECT_TRUE(
              absl::StrContains(status.message(), "fault injected by SYNCLINE_FAULT"))
              << status;
        }
      },
      PluginRun("faults", kTimeoutS, {{"SYNCLINE_FAULT", "close:rank=0,op=2"}}));
  ExpectAllSucceeded(results);
}

TEST(FaultsPlugin, FailInitFailsCreationWithAClearMessage) {
  auto results = RunRanks(
      2,
      [](int rank, int) {
        const absl::Time start = absl::Now();
        auto comm = Communicator::Create({});
        const absl::Duration took = absl::Now() - start;
        Note(rank, "Create", comm.status(), took);
        ASSERT_FALSE(comm.ok());
        if (rank == 1) {
          EXPECT_TRUE(
              absl::StrContains(comm.status().message(),
                                "fault injected by SYNCLINE_FAULT (fail_init:rank=1)"))
              << comm.status();
          EXPECT_LT(took, absl::Seconds(kTimeoutS));
        } else {
          EXPECT_LT(took, absl::Seconds(kTimeoutS + 3)) << comm.status();
        }
      },
      PluginRun("faults", kTimeoutS, {{"SYNCLINE_FAULT", "fail_init:rank=1"}}));
  ExpectAllSucceeded(results);
}

TEST(FaultsPlugin, MalformedSpecFailsCreationNamingTheVariable) {
  auto results = RunRanks(
      1,
      [](int, int) {
        auto comm = Communicator::Create({});
        ASSERT_FALSE(comm.ok());
        EXPECT_TRUE(absl::StrContains(comm.status().message(),
                                      "SYNCLINE_FAULT entry 'kill:op=2'"))
            << comm.status();
      },
      PluginRun("faults", kTimeoutS, {{"SYNCLINE_FAULT", "kill:op=2"}}));
  ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::testing
