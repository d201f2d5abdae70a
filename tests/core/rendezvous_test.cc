// rendezvous_test.cc: rank discovery and the check-in, with every bad input.
#include "syncline/rendezvous.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/multiprocess.h"
#include "common/scoped_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/tcp_store.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunOptions;
using testing::RunRanks;

std::string Host() {
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

// How messages name a job.
std::string JobName(const std::string& job_id) {
  return job_id.empty() ? "a job with no id"
                        : absl::StrCat("job '", job_id, "' (from SYNCLINE_JOB_ID)");
}

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

// The line Meet() printed.
std::string ResultLine(const testing::RankResult& r) {
  size_t at = r.output.find("RESULT: ");
  if (at == std::string::npos) return "";
  return r.output.substr(at, r.output.find('\n', at) - at);
}

TEST(RendezvousProcesses, OnlySomeRanksStartNamesTheMissing) {
  // Two processes start for a world of 3: rank 2 never comes. Rank 0 hosts
  // the store, and must keep it until rank 1 has read why they failed.
  RunOptions options{.env = {{"SYNCLINE_WORLD_SIZE", "3"}}, .host_store = false};
  auto results = RunRanks(2, [](int, int) { Meet(absl::Seconds(2)); }, options);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_THAT(r.output, HasSubstr("2 of 3 ranks checked in (ranks 0-1, 2 in all); "
                                    "missing: rank 2"));
    EXPECT_THAT(r.output, HasSubstr("DEADLINE_EXCEEDED: rendezvous at 127.0.0.1:"));
    EXPECT_THAT(r.output, Not(HasSubstr("lost the store")));
    EXPECT_LT(r.seconds, 6.0) << "must fail within the init timeout, not twice it";
  }
  EXPECT_EQ(ResultLine(results[0]), ResultLine(results[1])) << "one verdict for all";
}

TEST(RendezvousProcesses, ASecondProcessOnARankIsRefusedNamingTheHolder) {
  // Both processes claim rank 0 of 2. The later one is refused at once,
  // naming the holder's host and pid; the job (the holder) is not killed by
  // it, but warns, and its timeout names the refused process.
  RunOptions options{.rank_env = {{1, {{"SYNCLINE_RANK", "0"}}}}};
  auto results = RunRanks(2, [](int, int) { Meet(absl::Seconds(6)); }, options);
  ASSERT_EQ(results.size(), 2u);
  const bool first_refused = results[0].output.find("is refused") != std::string::npos;
  const testing::RankResult& refused = results[first_refused ? 0 : 1];
  const testing::RankResult& holder = results[first_refused ? 1 : 0];
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr(absl::StrCat(
      "ALREADY_EXISTS: rendezvous at 127.0.0.1:")));
  EXPECT_THAT(refused.output, HasSubstr(absl::StrCat(
      "rank 0 is claimed by two processes: host ", Host(), " pid ", holder.pid,
      " holds it (it checked in first), so this process (host ", Host(), " pid ",
      refused.pid, ") is refused")));
  EXPECT_LT(refused.seconds, holder.seconds) << "refused at check-in, not at the timeout";
  EXPECT_EQ(holder.exit_code, 3) << holder.output;
  EXPECT_THAT(holder.output, HasSubstr("refused a process that is not part of this job"));
  EXPECT_THAT(holder.output, HasSubstr("missing: rank 1."));
  EXPECT_THAT(holder.output, HasSubstr(absl::StrCat("pid ", refused.pid, ": rank 0 is already held by host ",
                                                    Host(), " pid ", holder.pid)));
}

// One job of two ranks plus a process that claims another world size: it is
// refused on arrival, and the job warns and, missing a rank, names it when
// it times out. Parameter: which rank has the odd size, and the job id.
class WorldSizeMismatch : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(WorldSizeMismatch, TheOddProcessIsRefusedAndTheJobNamesIt) {
  const auto [odd_rank, job_id] = GetParam();
  RunOptions options{.env = {{"SYNCLINE_JOB_ID", job_id}},
                     .rank_env = {{odd_rank, {{"SYNCLINE_WORLD_SIZE", "3"}}}}};
  auto results = RunRanks(2, [](int, int) { Meet(absl::Seconds(5)); }, options);
  ASSERT_EQ(results.size(), 2u);
  // Rank 0's record is the job's: the other rank is the odd one out.
  const testing::RankResult& job = results[0];
  const testing::RankResult& refused = results[1];
  const int job_size = odd_rank == 0 ? 3 : 2, refused_size = odd_rank == 0 ? 2 : 3;
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr(absl::StrFormat(
      "WORLD_SIZE=%d, on host %s pid %d): the store there serves %s with WORLD_SIZE=%d, whose "
      "rank 0 is host %s pid %d; this process claims another world size",
      refused_size, Host(), refused.pid, JobName(job_id), job_size, Host(), job.pid)));
  EXPECT_THAT(refused.output, HasSubstr("Two jobs share MASTER_ADDR:MASTER_PORT (127.0.0.1:"));
  EXPECT_LT(refused.seconds, job.seconds) << "refused at check-in, not at the timeout";
  EXPECT_EQ(job.exit_code, 3) << job.output;
  std::string named = absl::StrFormat("rank 1 of %s, WORLD_SIZE=%d, on host %s pid %d: "
                                      "another world size",
                                      JobName(job_id), refused_size, Host(), refused.pid);
  EXPECT_THAT(job.output, HasSubstr(absl::StrCat("refused a process that is not part of this job: ",
                                                 named)));
  EXPECT_THAT(job.output, HasSubstr(absl::StrFormat("1 of %d ranks checked in (rank 0); missing: %s",
                                                    job_size, job_size == 2 ? "rank 1" : "ranks 1-2, 2 in all")));
  EXPECT_THAT(job.output, HasSubstr(absl::StrCat("Refused meanwhile, as not part of this job "
                                                 "(two jobs share MASTER_ADDR:MASTER_PORT, or "
                                                 "ranks started with conflicting settings): ",
                                                 named)));
}

INSTANTIATE_TEST_SUITE_P(OddRankAndJobId, WorldSizeMismatch,
                         ::testing::Values(std::make_tuple(1, std::string()),
                                           std::make_tuple(0, std::string("train-7"))));

TEST(RendezvousProcesses, ARankOfAnotherJobIsRefusedAndTheJobGoesOn) {
  // Job A (ranks 0 and 1, rank 0 hosting the store) and a rank 1 of job B on
  // the same port. B's process is refused; A's real rank 1 checks in only
  // after that (it waits for the refusal on the store), and job A meets.
  RunOptions options{.env = {{"SYNCLINE_WORLD_SIZE", "2"}, {"SYNCLINE_JOB_ID", "A"}},
                     .rank_env = {{2, {{"SYNCLINE_RANK", "1"}, {"SYNCLINE_JOB_ID", "B"}}}},
                     .host_store = false};
  auto results = RunRanks(3, [](int process, int) {
    if (process == 1) {
      auto info = ResolveRendezvous(-1, -1);
      ASSERT_TRUE(info.ok()) << info.status();
      auto probe = ConnectTcpStore({.host = info->master_addr, .port = info->master_port,
                                    .connect_timeout = absl::Seconds(60)});
      ASSERT_TRUE(probe.ok()) << probe.status();
      auto refused = (*probe)->Get("rdzv/event/1", absl::Seconds(60));
      ASSERT_TRUE(refused.ok()) << refused.status();
    }
    Meet(absl::Seconds(60));
  }, options);
  ASSERT_EQ(results.size(), 3u);
  const testing::RankResult& intruder = results[2];
  EXPECT_EQ(results[0].exit_code, 0) << results[0].output;
  EXPECT_EQ(results[1].exit_code, 0) << results[1].output;
  EXPECT_EQ(intruder.exit_code, 3) << intruder.output;
  EXPECT_THAT(intruder.output, HasSubstr(absl::StrFormat(
      "refused this process (rank 1 of job 'B' (from SYNCLINE_JOB_ID), WORLD_SIZE=2, on host "
      "%s pid %d): the store there serves job 'A' (from SYNCLINE_JOB_ID) with WORLD_SIZE=2, "
      "whose rank 0 is host %s pid %d; this process belongs to another job",
      Host(), intruder.pid, Host(), results[0].pid)));
  EXPECT_THAT(intruder.output, HasSubstr("Two jobs share MASTER_ADDR:MASTER_PORT"));
  EXPECT_THAT(results[0].output, HasSubstr(absl::StrFormat(
      "refused a process that is not part of this job: rank 1 of job 'B' (from "
      "SYNCLINE_JOB_ID), WORLD_SIZE=2, on host %s pid %d: another job",
      Host(), intruder.pid)));
  EXPECT_THAT(results[0].output, HasSubstr("Two jobs share MASTER_ADDR:MASTER_PORT"));
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

// Rank 0, hosting the store itself, holds it to SYNCLINE_STORE_MAX_BYTES: a
// write beyond it is refused naming the variable, the store keeps serving;
// a value that is no positive number stops rank 0 before it listens.
TEST(Rendezvous, RankZeroHoldsItsStoreToSynclineStoreMaxBytes) {
  int port;
  {
    auto probe = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
    port = probe->port();
  }
  auto info = [&](int rank) {
    RendezvousInfo i;
    i.rank = rank;
    i.world_size = 2;
    i.master_port = port;
    i.job_id = "quota";
    i.job_id_source = "SYNCLINE_JOB_ID";
    return i;
  };
  {
    testing::ScopedEnv quota("SYNCLINE_STORE_MAX_BYTES", "-1");
    auto refused = ConnectRendezvousStore(info(0), absl::Seconds(5));
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("SYNCLINE_STORE_MAX_BYTES=-1"));
  }
  testing::ScopedEnv quota("SYNCLINE_STORE_MAX_BYTES", "8000");
  absl::StatusOr<std::shared_ptr<Store>> stores[2];
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = std::thread(
        [&, r] { stores[r] = ConnectRendezvousStore(info(r), absl::Seconds(30)); });
  }
  for (auto& t : ranks) t.join();
  ASSERT_TRUE(stores[0].ok()) << stores[0].status();
  ASSERT_TRUE(stores[1].ok()) << stores[1].status();
  absl::Status refused = (*stores[1])->Set("big", std::string(10000, 'x'));
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("SYNCLINE_STORE_MAX_BYTES"));
  ASSERT_TRUE((*stores[1])->Set("small", "v").ok());
  EXPECT_EQ(*(*stores[0])->Get("small", absl::Seconds(5)), "v");
}

}  // namespace
}  // namespace syncline
