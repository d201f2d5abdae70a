// UCX Split: children share the parent's worker and endpoints (comm_split,
// see backends/ucx/communicator.h), each with its own tag space. These
// tests run real ranks and check, against sums computed here from every
// rank's known input:
//   - parent and children running collectives interleaved, posted and
//     waited in different orders on different ranks (progress is per
//     worker, so no rank can wait forever on another's unprogressed op);
//   - nested splits and ranks that opt out (color < 0);
//   - destroying parent or child first;
//   - that Split really reuses the transport: no store exchange of worker
//     addresses, no new file descriptors (a new UCP worker opens several);
//     the same measurements on a communicator made by Create() show both,
//     so they can fail;
//   - a family out of tag spaces gives a new group a fresh worker instead;
//   - Abort of one communicator leaves the rest of its family working;
//   - a rank SIGKILLed during a child op fails the other members' op with a
//     peer error well within the timeout, and then a parent op on every
//     survivor (the endpoint to the dead rank is shared);
//   - the same splits under SYNCLINE_PLUGINS=trace,check.
#include <dirent.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/multiprocess.h"
#include "tests/backends/ucx/ucx_test_util.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/store.h"
#include "syncline/tcp_store.h"

namespace syncline::testing {
namespace {

constexpr absl::Duration kWait = absl::Seconds(60);

// Forwards to the job's store and remembers every key set through it.
class RecordingStore : public Store {
 public:
  explicit RecordingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      keys_.emplace_back(key);
    }
    return inner_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    return inner_->Get(key, timeout);
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    return inner_->Add(key, delta);
  }
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override {
    return inner_->Wait(keys, timeout);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    return inner_->CompareSet(key, expected, desired);
  }
  absl::StatusOr<bool> Delete(absl::string_view key) override {
    return inner_->Delete(key);
  }
  absl::StatusOr<int64_t> NumKeys() override { return inner_->NumKeys(); }
  absl::StatusOr<std::vector<bool>> Check(absl::Span<const std::string> keys) override {
    return inner_->Check(keys);
  }
  // How many keys containing `part` were set so far.
  int CountKeys(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const std::string& k : keys_) n += absl::StrContains(k, part) ? 1 : 0;
    return n;
  }

 private:
  std::shared_ptr<Store> inner_;
  std::mutex mu_;
  std::vector<std::string> keys_;
};

int OpenFds() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n;
}

// Waits until `n` ranks reached `name`, outside every communicator: an
// abort notice fails whatever op of that communicator a peer still runs, so
// the abort tests let every rank finish first.
void StoreBarrier(Store& store, const std::string& name, int n) {
  ASSERT_TRUE(store.Add(name, 1).ok());
  const absl::Time until = absl::Now() + kWait;
  while (*store.Add(name, 0) < n) {
    ASSERT_LT(absl::Now(), until) << "ranks never reached " << name;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

std::unique_ptr<Communicator> SplitOrDie(Communicator& comm, int color, int key) {
  auto child = comm.Split(color, key);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return nullptr;
  EXPECT_EQ(*child == nullptr, color < 0);
  return std::move(child).value();
}

// Allreduces `value` (as i64 x count) and checks the sum against `want`.
void ExpectAllreduce(Communicator& comm, int64_t value, int64_t want,
                     const std::string& what, size_t count = 3) {
  std::vector<int64_t> data(count, value);
  auto work = comm.Allreduce(View(data));
  ASSERT_TRUE(work.ok()) << what << ": " << work.status();
  const absl::Status done = (*work)->Wait(kWait);
  ASSERT_TRUE(done.ok()) << what << ": " << done;
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], want) << what << " index " << i;
}

TEST(UcxSplit, ParentAndChildrenRunInterleavedInAnyOrder) {
  auto results = RunRanks(4, [](int rank, int size) {
    auto parent = CreateUcx();
    ASSERT_NE(parent, nullptr);
    const int color = rank % 2;
    auto child = SplitOrDie(*parent, color, rank);
    ASSERT_NE(child, nullptr);
    ASSERT_EQ(child->size(), 2);
    EXPECT_EQ(child->rank(), rank / 2);
    // Inputs: parent gets rank + 1 (sum 10), the child 100 * (rank + 1)
    // plus the round, so a message crossing between groups or rounds shows.
    constexpr int kRounds = 20;
    for (int round = 0; round < kRounds; ++round) {
      int64_t parent_want = 0, child_want = 0;
      for (int r = 0; r < size; ++r) {
        parent_want += r + 1 + round;
        if (r % 2 == color) child_want += 100 * (r + 1) + round;
      }
      std::vector<int64_t> p(5, rank + 1 + round), c(1000, 100 * (rank + 1) + round);
      // Post and wait in opposite orders on even and odd ranks: an even rank
      // waits on its child op while its parent peers wait on the parent op.
      absl::StatusOr<std::unique_ptr<Work>> pw, cw;
      if (rank % 2 == 0) {
        cw = child->Allreduce(View(c));
        pw = parent->Allreduce(View(p));
      } else {
        pw = parent->Allreduce(View(p));
        cw = child->Allreduce(View(c));
      }
      ASSERT_TRUE(pw.ok() && cw.ok()) << pw.status() << " " << cw.status();
      const bool child_first = (rank + round) % 2 == 0;
      Work& first = child_first ? **cw : **pw;
      Work& second = child_first ? **pw : **cw;
      ASSERT_TRUE(first.Wait(kWait).ok()) << "round " << round;
      ASSERT_TRUE(second.Wait(kWait).ok()) << "round " << round;
      for (int64_t v : p) ASSERT_EQ(v, parent_want) << "parent, round " << round;
      for (int64_t v : c) ASSERT_EQ(v, child_want) << "child, round " << round;
    }
    // Point to point inside the child: its ranks, not the parent's.
    std::vector<int32_t> token(4, rank);
    const int peer = 1 - child->rank();
    auto sent = child->Send(View(token), peer, {.tag = 7});
    std::vector<int32_t> got(4, -1);
    auto received = child->Recv(View(got), peer, {.tag = 7});
    ASSERT_TRUE(sent.ok() && received.ok());
    ASSERT_TRUE((*received)->Wait(kWait).ok());
    ASSERT_TRUE((*sent)->Wait(kWait).ok());
    EXPECT_EQ(got[3], color + 2 * peer) << "the peer's parent rank";
  });
  ExpectAllSucceeded(results);
}

TEST(UcxSplit, NestedSplitsAndRanksThatOptOut) {
  auto results = RunRanks(4, [](int rank, int size) {
    auto world = CreateUcx();
    ASSERT_NE(world, nullptr);
    // Ranks 0..2 form a group (ordered by descending rank); rank 3 opts out.
    auto trio = SplitOrDie(*world, rank < 3 ? 0 : -1, -rank);
    if (rank == 3) {
      EXPECT_EQ(trio, nullptr);
    } else {
      ASSERT_NE(trio, nullptr);
      ASSERT_EQ(trio->size(), 3);
      EXPECT_EQ(trio->rank(), 2 - rank);
      ExpectAllreduce(*trio, rank, 0 + 1 + 2, "trio");
      // Split of a split: trio ranks {0, 2} (world 2, 0) and {1} (world 1).
      auto sub = SplitOrDie(*trio, trio->rank() % 2, trio->rank());
      ASSERT_NE(sub, nullptr);
      const int64_t want = rank == 1 ? 1 : 2 + 0;
      EXPECT_EQ(sub->size(), rank == 1 ? 1 : 2);
      ExpectAllreduce(*sub, rank, want, "nested");
      ExpectAllreduce(*trio, 10 * rank, 30, "trio after the nested split");
      ExpectAllreduce(*sub, rank + 1, want + sub->size(), "nested again");
    }
    // The world, which also split for everyone after rank 3 opted out.
    ExpectAllreduce(*world, rank, 0 + 1 + 2 + 3, "world");
    auto again = SplitOrDie(*world, 0, rank);  // everyone, after nested spaces
    ASSERT_NE(again, nullptr);
    ExpectAllreduce(*again, rank + 1, 10, "second world split");
    (void)size;
  });
  ExpectAllSucceeded(results);
}

TEST(UcxSplit, ParentOrChildMayBeDestroyedFirst) {
  auto results = RunRanks(4, [](int rank, int) {
    // Child outlives its parent: the shared worker stays with the child.
    {
      auto parent = CreateUcx();
      ASSERT_NE(parent, nullptr);
      auto child = SplitOrDie(*parent, rank % 2, rank);
      ASSERT_NE(child, nullptr);
      ExpectAllreduce(*parent, rank, 6, "parent before destroy");
      parent.reset();
      for (int i = 0; i < 5; ++i) {
        ExpectAllreduce(*child, rank + i, rank % 2 == 0 ? 2 + 2 * i : 4 + 2 * i,
                        "child after its parent is gone");
      }
      auto grandchild = SplitOrDie(*child, 0, -rank);
      ASSERT_NE(grandchild, nullptr);
      child.reset();
      ExpectAllreduce(*grandchild, 1, 2, "grandchild after both ancestors are gone");
    }
    // Parent outlives its child.
    {
      auto parent = CreateUcx();
      ASSERT_NE(parent, nullptr);
      auto child = SplitOrDie(*parent, rank % 2, rank);
      ASSERT_NE(child, nullptr);
      ExpectAllreduce(*child, 1, 2, "child before destroy");
      child.reset();
      ExpectAllreduce(*parent, rank, 6, "parent after its child is gone");
      auto next = SplitOrDie(*parent, rank / 2, rank);
      ASSERT_NE(next, nullptr);
      ExpectAllreduce(*next, rank, rank < 2 ? 1 : 5, "a new child");
    }
  });
  ExpectAllSucceeded(results);
}

// Shared by the reuse test with and without interposers.
void ExpectSplitReusesTheTransport(int rank, int size) {
  std::shared_ptr<Store> job = JobStore();
  ASSERT_NE(job, nullptr);
  auto store = std::make_shared<RecordingStore>(job);
  auto parent = CreateUcx(store, rank, size);
  ASSERT_NE(parent, nullptr);
  // Control: creating a communicator publishes this rank's worker address
  // and opens descriptors for the new worker. Both counters can move.
  EXPECT_EQ(store->CountKeys("ucx/peer/"), 1) << "Create publishes the worker address";
  ExpectAllreduce(*parent, 1, size, "warm-up");
  const int fds_before = OpenFds();
  const int published_before = store->CountKeys("ucx/peer/");
  auto child = SplitOrDie(*parent, rank % 2, rank);
  ASSERT_NE(child, nullptr);
  ExpectAllreduce(*child, 1, 2, "child");
  auto grandchild = SplitOrDie(*child, 0, rank);
  ASSERT_NE(grandchild, nullptr);
  ExpectAllreduce(*grandchild, 1, 2, "grandchild");
  EXPECT_EQ(store->CountKeys("ucx/peer/"), published_before)
      << "Split exchanged worker addresses through the store: it built a new worker";
  // (<=: UCX's tcp transport may still be closing duplicate connections
  // from the wire-up; a new worker or new connections would add some.)
  EXPECT_LE(OpenFds(), fds_before)
      << "Split opened file descriptors: a new UCP worker or new connections";
  // The control, done last so it cannot disturb the measurements above.
  auto independent = CreateUcx(store, rank, size);
  ASSERT_NE(independent, nullptr);
  EXPECT_GT(OpenFds(), fds_before) << "a created communicator has its own worker";
  EXPECT_EQ(store->CountKeys("ucx/peer/"), published_before + 1);
  ExpectAllreduce(*independent, 2, 2 * size, "independent");
}

TEST(UcxSplit, ReusesTheParentsWorkerAndEndpoints) {
  auto results = RunRanks(4, ExpectSplitReusesTheTransport);
  ExpectAllSucceeded(results);
}

TEST(UcxSplit, UnderTraceAndCheckInterposers) {
  RunOptions run;
  run.env["SYNCLINE_PLUGINS"] = "trace,check";
  run.env["SYNCLINE_TRACE_DIR"] = ::testing::TempDir() + "/ucx_split_trace";
  auto results = RunRanks(
      4,
      [](int rank, int size) {
        // The interposers wrap comm_split (no fallback to comm_create): Split
        // still opens nothing and publishes no worker address.
        ExpectSplitReusesTheTransport(rank, size);
        auto parent = CreateUcx();
        ASSERT_NE(parent, nullptr);
        auto child = SplitOrDie(*parent, rank % 2, rank);
        ASSERT_NE(child, nullptr);
        for (int round = 0; round < 5; ++round) {
          ExpectAllreduce(*child, rank + round,
                          rank % 2 == 0 ? 2 + 2 * round : 4 + 2 * round,
                          "child under trace,check");
          ExpectAllreduce(*parent, rank, 6, "parent under trace,check");
        }
        // The check interposer still sees ranks by their child numbering: a
        // desync inside the child is reported as such.
        std::vector<float> a(child->rank() == 0 ? 4 : 5, 1.0f);
        auto w = child->Allreduce(View(a));
        absl::Status s = w.ok() ? (*w)->Wait(kWait) : w.status();
        EXPECT_FALSE(s.ok());
        EXPECT_TRUE(absl::StrContains(s.message(), "rank")) << s;
        ExpectAllreduce(*parent, 1, 4, "parent after the child's desync");
      },
      run);
  ExpectAllSucceeded(results);
}

TEST(UcxSplit, FallsBackToAFreshWorkerWhenTheFamilyRunsOutOfTagSpaces) {
  auto results = RunRanks(4, [](int rank, int size) {
    std::shared_ptr<Store> job = JobStore();
    ASSERT_NE(job, nullptr);
    auto store = std::make_shared<RecordingStore>(job);
    // Spaces 0 (the parent), 1 and 2 (the two halves); a further split
    // cannot fit and must build its group a worker of its own.
    auto parent = CreateUcx(store, rank, size, "tag_spaces=3");
    ASSERT_NE(parent, nullptr);
    ExpectAllreduce(*parent, 1, size, "warm-up");
    const int fds_before = OpenFds();
    auto half = SplitOrDie(*parent, rank % 2, rank);
    ASSERT_NE(half, nullptr);
    // (<=: UCX's tcp transport may still be closing duplicate connections
    // from the wire-up; a new worker would add several.)
    EXPECT_LE(OpenFds(), fds_before) << "spaces 1 and 2 fit: reused";
    EXPECT_EQ(store->CountKeys("ucx/peer/"), 1);
    auto fresh = SplitOrDie(*half, 0, rank);
    ASSERT_NE(fresh, nullptr);
    EXPECT_GT(OpenFds(), fds_before) << "no space left: a fresh worker";
    EXPECT_EQ(store->CountKeys("ucx/peer/"), 2) << "bootstrapped through the store";
    ExpectAllreduce(*fresh, rank, rank % 2 == 0 ? 2 : 4, "fallback group");
    ExpectAllreduce(*half, rank + 1, rank % 2 == 0 ? 4 : 6, "its parent");
    ExpectAllreduce(*parent, rank, 6, "the root");
    // The fallback group heads a family of its own, with spaces to spare.
    auto nested = SplitOrDie(*fresh, 0, -rank);
    ASSERT_NE(nested, nullptr);
    EXPECT_EQ(store->CountKeys("ucx/peer/"), 2);
    ExpectAllreduce(*nested, 1, 2, "split of the fallback group");
  });
  ExpectAllSucceeded(results);
}

TEST(UcxSplit, AbortIsPerCommunicator) {
  auto results = RunRanks(4, [](int rank, int) {
    auto parent = CreateUcx();
    ASSERT_NE(parent, nullptr);
    auto child = SplitOrDie(*parent, rank % 2, rank);
    ASSERT_NE(child, nullptr);
    ExpectAllreduce(*child, 1, 2, "child before the abort");
    std::shared_ptr<Store> job = JobStore();
    ASSERT_NE(job, nullptr);
    StoreBarrier(*job, "abort_test/child_done", 4);
    // Rank 1 aborts its child (with rank 3): that child fails on both.
    if (rank == 1) {
      ASSERT_TRUE(child->Abort().ok());
      std::vector<int64_t> d(1, 1);
      auto w = child->Allreduce(View(d));
      EXPECT_TRUE(!w.ok() && absl::IsAborted(w.status())) << w.status();
    }
    if (rank == 3) {
      std::vector<int64_t> d(1, 1);
      auto w = child->Allreduce(View(d));
      absl::Status s = w.ok() ? (*w)->Wait(kWait) : w.status();
      EXPECT_FALSE(s.ok()) << "rank 1 aborted this group";
    }
    // The parent and the other child are untouched.
    ExpectAllreduce(*parent, rank, 6, "parent after a child's abort");
    if (rank % 2 == 0) ExpectAllreduce(*child, rank, 2, "the other child");
    // Aborting the parent everywhere leaves the healthy child working.
    StoreBarrier(*job, "abort_test/parent_done", 4);
    ASSERT_TRUE(parent->Abort().ok());
    std::vector<int64_t> d(1, 1);
    auto w = parent->Allreduce(View(d));
    EXPECT_TRUE(!w.ok() && absl::IsAborted(w.status())) << w.status();
    if (rank % 2 == 0)
      ExpectAllreduce(*child, rank + 1, 4, "child after the parent's abort");
  });
  ExpectAllSucceeded(results);
}

TEST(UcxSplit, KilledRankFailsItsChildAndThenTheParentWithinTheTimeout) {
  constexpr int kVictim = 1;  // child of color 1 = {1, 3}: child rank 0
  constexpr size_t kCount = (size_t{16} << 20) / sizeof(float);
  const absl::Duration op_timeout = absl::Seconds(20);
  RunOptions run;
  run.timeout = absl::Seconds(120);
  auto results = RunRanks(
      4,
      [&](int rank, int) {
        auto parent = CreateUcx();
        ASSERT_NE(parent, nullptr);
        auto child = SplitOrDie(*parent, rank % 2, rank);
        ASSERT_NE(child, nullptr);
        std::vector<float> data(kCount, 1.0f);
        bool saw_death = false;
        for (int iteration = 0; iteration < 20; ++iteration) {
          const uint64_t seq = child->next_seq();
          AllreduceOptions o;
          o.timeout = op_timeout;
          auto work = child->Allreduce(View(data), o);
          ASSERT_TRUE(work.ok()) << work.status();
          if (rank == kVictim && iteration == 2) {
            absl::SleepFor(absl::Milliseconds(20));  // let the transfer start
            raise(SIGKILL);
          }
          const absl::Time start = absl::Now();
          const absl::Status status = (*work)->Wait(op_timeout + absl::Seconds(30));
          const absl::Duration took = absl::Now() - start;
          if (status.ok()) continue;
          std::printf("rank %d: iteration %d failed after %s: %s\n", rank, iteration,
                      absl::FormatDuration(took).c_str(), status.ToString().c_str());
          std::fflush(stdout);
          saw_death = true;
          EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
          EXPECT_LT(took, op_timeout / 2) << "detected by the timeout, not the death";
          EXPECT_TRUE(
              absl::StrContains(status.message(), "allreduce #" + std::to_string(seq)))
              << status;
          EXPECT_TRUE(absl::StrContains(status.message(), "peer rank 0")) << status;
          break;
        }
        EXPECT_EQ(saw_death, rank == 3) << "only the victim's group sees it in the child";
        // The dead rank is a member of the parent too, over the same
        // endpoints: a parent op that needs it fails as fast, on every rank.
        std::vector<float> small(4, 1.0f);
        AllreduceOptions o;
        o.timeout = op_timeout;
        auto parent_op = parent->Allreduce(View(small), o);
        const absl::Time start = absl::Now();
        const absl::Status status =
            parent_op.ok() ? (*parent_op)->Wait(op_timeout + absl::Seconds(30))
                           : parent_op.status();
        EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
        EXPECT_LT(absl::Now() - start, op_timeout / 2) << status;
      },
      run);
  ASSERT_EQ(results.size(), 4u);
  for (const RankResult& r : results) {
    if (r.rank == kVictim) {
      EXPECT_EQ(r.signal, SIGKILL) << r.output;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.output;
      if (r.rank == 3) {
        EXPECT_TRUE(absl::StrContains(r.output, "failed after")) << r.output;
      }
    }
  }
}

}  // namespace
}  // namespace syncline::testing
