// rendezvous_test.cc: rank discovery and the check-in, with every bad input.
#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/rendezvous.h"
#include "syncline/tcp_store.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using testing::RunOptions;
using testing::RunRanks;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(ResolveRendezvous, DefaultIsRankZeroOfOne) {
  auto info = ResolveRendezvous(-1, -1, FakeEnv({}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rank, 0);
  EXPECT_EQ(info->world_size, 1);
  EXPECT_EQ(info->source, "default");
}

TEST(ResolveRendezvous, PrecedenceSynclineTorchrunSlurmMpi) {
  auto all = FakeEnv({{"SYNCLINE_RANK", "1"}, {"SYNCLINE_WORLD_SIZE", "2"},
                      {"RANK", "3"}, {"WORLD_SIZE", "4"},
                      {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"},
                      {"OMPI_COMM_WORLD_RANK", "7"}, {"OMPI_COMM_WORLD_SIZE", "8"}});
  EXPECT_EQ(ResolveRendezvous(-1, -1, all)->source, "syncline");
  EXPECT_EQ(ResolveRendezvous(-1, -1, all)->rank, 1);
  auto explicit_info = ResolveRendezvous(0, 1, all);
  EXPECT_EQ(explicit_info->source, "explicit");
  EXPECT_EQ(explicit_info->world_size, 1);
  auto torch = ResolveRendezvous(-1, -1, FakeEnv({{"RANK", "3"}, {"WORLD_SIZE", "4"},
                                                  {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                                                  {"MASTER_ADDR", "10.1.2.3"},
                                                  {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(torch->source, "torchrun");
  EXPECT_EQ(torch->rank, 3);
  EXPECT_EQ(torch->local_rank, 1);
  EXPECT_EQ(torch->local_world_size, 2);
  EXPECT_EQ(torch->master_addr, "10.1.2.3");
  EXPECT_EQ(torch->master_port, 1234);
  auto slurm = ResolveRendezvous(-1, -1, FakeEnv({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"},
                                                  {"SLURM_LOCALID", "1"},
                                                  {"SLURM_STEP_NODELIST", "gpu[03-05,9],cpu1"},
                                                  {"SLURM_JOB_ID", "4242"}}));
  EXPECT_EQ(slurm->source, "slurm");
  EXPECT_EQ(slurm->rank, 5);
  EXPECT_EQ(slurm->master_addr, "gpu03");
  EXPECT_EQ(slurm->master_port, 20000 + 4242);
  auto mpi = ResolveRendezvous(-1, -1, FakeEnv({{"OMPI_COMM_WORLD_RANK", "7"},
                                                {"OMPI_COMM_WORLD_SIZE", "8"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}));
  EXPECT_EQ(mpi->source, "openmpi");
  EXPECT_EQ(mpi->rank, 7);
  EXPECT_EQ(mpi->local_rank, 3);
}

TEST(ResolveRendezvous, BadInputIsRejectedWithTheReason) {
  struct Case { std::map<std::string, std::string> env; std::string message; };
  std::vector<Case> cases = {
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "rank 2 (from torchrun) is not below the world size 2"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK='-1' is not a valid rank"},
      {{{"RANK", "abc"}, {"WORLD_SIZE", "2"}}, "RANK='abc' is not a valid rank"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "two"}}, "WORLD_SIZE='two' is not a valid world size"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "must be at least 1"},
      {{{"RANK", "0"}}, "RANK is set but WORLD_SIZE is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT='70000' is not a valid port"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29x"}}, "MASTER_PORT='29x' is not a valid port"},
  };
  for (const Case& c : cases) {
    auto info = ResolveRendezvous(-1, -1, FakeEnv(c.env));
    ASSERT_FALSE(info.ok()) << c.message;
    EXPECT_TRUE(absl::IsInvalidArgument(info.status()));
    EXPECT_THAT(std::string(info.status().message()), HasSubstr(c.message));
  }
}

// Rank body: meet through the environment, print the outcome, exit 0 or 3.
void Meet(absl::Duration timeout) {
  auto info = ResolveRendezvous(-1, -1);
  absl::Status status = info.status();
  std::shared_ptr<Store> store;
  if (info.ok()) {
    auto connected = ConnectRendezvousStore(*info, timeout);
    status = connected.status();
    if (connected.ok()) store = *connected;
  }
  if (store) {
    // Rank 0 may host the store: it leaves last, once everyone is done with it.
    (void)store->Add("left", 1);
    if (info->rank == 0) {
      while (true) {
        auto left = store->Add("left", 0);
        if (!left.ok() || *left >= info->world_size) break;
        absl::SleepFor(absl::Milliseconds(2));
      }
    }
  }
  std::fprintf(stderr, "RESULT: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  if (!status.ok()) ::_exit(3);
}

TEST(RendezvousProcesses, AllRanksMeet) {
  auto results = RunRanks(4, [](int, int) { Meet(absl::Seconds(20)); },
                          RunOptions{.host_store = false});
  testing::ExpectAllSucceeded(results);
}

TEST(RendezvousProcesses, OnlySomeRanksStartNamesTheMissing) {
  // Two processes start for a world of 3: rank 2 never comes.
  RunOptions options{.env = {{"SYNCLINE_WORLD_SIZE", "3"}}, .host_store = false};
  auto results = RunRanks(2, [](int, int) { Meet(absl::Seconds(2)); }, options);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 3) << r.output;
    // Rank 0 reports the timeout; rank 1 may instead see rank 0's store go
    // away at that moment. Both name who checked in and who is missing.
    EXPECT_THAT(r.output, HasSubstr("(ranks [0,1]); missing ranks [2]"));
    if (r.rank == 0) EXPECT_THAT(r.output, HasSubstr("2 of 3 ranks checked in"));
    EXPECT_THAT(r.output, HasSubstr("127.0.0.1:"));
    EXPECT_LT(r.seconds, 6.0) << "must fail within the init timeout, not twice it";
  }
}

TEST(RendezvousProcesses, TwoProcessesClaimingOneRank) {
  RunOptions options{.rank_env = {{1, {{"SYNCLINE_RANK", "0"}}}}};
  auto results = RunRanks(2, [](int, int) { Meet(absl::Seconds(5)); }, options);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_THAT(r.output, HasSubstr("rank 0 is claimed by two processes"));
    EXPECT_LT(r.seconds, 4.0);
  }
}

TEST(RendezvousProcesses, WorldSizeDiffersBetweenRanks) {
  RunOptions options{.rank_env = {{1, {{"SYNCLINE_WORLD_SIZE", "3"}}}}};
  auto results = RunRanks(2, [](int, int) { Meet(absl::Seconds(5)); }, options);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_THAT(r.output, HasSubstr("world size differs between ranks"));
    EXPECT_LT(r.seconds, 4.0);
  }
}

TEST(Rendezvous, PortInUseFailsOnRankZero) {
  auto busy = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
  RendezvousInfo info;
  info.rank = 0;
  info.world_size = 2;
  info.master_port = busy->port();
  auto store = ConnectRendezvousStore(info, absl::Seconds(2));
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("another program uses that port"));
}

TEST(Rendezvous, UnreachableMasterFailsWithinTheTimeout) {
  int port;
  {
    auto probe = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
    port = probe->port();
  }
  RendezvousInfo info;
  info.rank = 1;
  info.world_size = 2;
  info.master_addr = "127.0.0.1";
  info.master_port = port;
  absl::Time start = absl::Now();
  auto store = ConnectRendezvousStore(info, absl::Seconds(1));
  ASSERT_FALSE(store.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr(absl::StrCat("could not reach the Syncline store at 127.0.0.1:", port)));
}

}  // namespace
}  // namespace syncline
