// Failure behaviour every backend must show: a rank that never joins an op,
// a rank killed in the middle of one, an abort, and ops the backend cannot
// or must not run. Each must end in a clear error within the op timeout,
// never a hang or a wrong answer.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/backend_params.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/store.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

std::unique_ptr<Communicator> Connect(const std::string& backend) {
  CommunicatorOptions options;
  options.backend = backend;
  options.timeout = absl::Seconds(30);
  auto comm = Communicator::Create(options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

// Posts and waits; returns the status and how long the op took.
absl::Status RunAllreduce(Communicator& comm, std::vector<float>& data,
                          absl::Duration op_timeout, absl::Duration* took) {
  const absl::Time start = absl::Now();
  AllreduceOptions options;
  options.timeout = op_timeout;
  auto work = comm.Allreduce(View(data), options);
  absl::Status status =
      work.ok() ? (*work)->Wait(op_timeout + absl::Seconds(60)) : work.status();
  *took = absl::Now() - start;
  return status;
}

// True once thread `tid` of this process sleeps in the kernel (state S in
// /proc): a thread whose only call is Wait() is then blocked inside it.
bool ThreadSleeps(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t name_end = stat.rfind(')');  // the state follows the "(name)" field
  return name_end != std::string::npos && name_end + 2 < stat.size() &&
         stat[name_end + 2] == 'S';
}

// The communicator under test, and a second one whose barrier holds ranks
// back while the first is examined (the tests' only synchronisation).
struct CommAndSync {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Communicator> sync;
};
CommAndSync ConnectWithSync(const std::string& backend) {
  CommAndSync made;
  made.comm = Connect(backend);
  made.sync = Connect(backend);
  return made;
}

bool Barrier(Communicator& comm) {
  auto barrier = comm.Barrier();
  const absl::Status status = barrier.ok() ? (*barrier)->Wait(absl::Seconds(60)) : barrier.status();
  EXPECT_TRUE(status.ok()) << status;
  return status.ok();
}

class FaultTest : public ::testing::TestWithParam<BackendCase> {};

TEST_P(FaultTest, RankThatNeverCallsTheOpFailsTheOthersInTime) {
  const std::string backend = GetParam().backend;
  constexpr int kMissing = 2;
  const absl::Duration op_timeout = absl::Seconds(3);
  RunOptions run;
  run.timeout = absl::Seconds(120);
  auto results = RunRanks(
      GetParam().world_size,
      [&](int rank, int) {
        auto comm = Connect(backend);
        ASSERT_NE(comm, nullptr);
        if (rank == kMissing) {  // joins the group, then never calls the op
          absl::SleepFor(op_timeout + absl::Seconds(5));
          return;
        }
        const uint64_t seq = comm->next_seq();
        std::vector<float> data(1001, 1.0f);
        absl::Duration took;
        const absl::Status status = RunAllreduce(*comm, data, op_timeout, &took);
        std::printf("rank %d: allreduce seq=%llu took %s: %s\n", rank,
                    static_cast<unsigned long long>(seq),
                    absl::FormatDuration(took).c_str(), status.ToString().c_str());
        std::fflush(stdout);
        ASSERT_FALSE(status.ok()) << "the op succeeded without rank " << kMissing;
        EXPECT_LT(took, op_timeout + absl::Seconds(4)) << status;
        EXPECT_TRUE(absl::StrContains(status.message(), "allreduce")) << status;
        EXPECT_TRUE(absl::StrContains(status.message(), "#" + std::to_string(seq)))
            << "the error does not name the op's sequence number: " << status;
      },
      run);
  ExpectAllSucceeded(results);
  for (const RankResult& r : results) {
    if (r.rank == kMissing) continue;
    EXPECT_TRUE(absl::StrContains(r.output, "allreduce seq=")) << r.output;
    std::printf("--- rank %d (%.2f s):\n%s", r.rank, r.seconds, r.output.c_str());
  }
}

TEST_P(FaultTest, RecvWithoutAMatchingSendTimesOut) {
  const std::string backend = GetParam().backend;
  const absl::Duration op_timeout = absl::Seconds(2);
  auto results = RunRanks(GetParam().world_size, [&](int rank, int) {
    auto comm = Connect(backend);
    ASSERT_NE(comm, nullptr);
    if (rank != 0) {  // never sends
      absl::SleepFor(op_timeout + absl::Seconds(2));
      return;
    }
    std::vector<int64_t> data(100);
    SendRecvOptions options;
    options.timeout = op_timeout;
    options.tag = 3;
    const uint64_t seq = comm->next_seq();
    const absl::Time start = absl::Now();
    auto work = comm->Recv(View(data), /*peer=*/1, options);
    ASSERT_TRUE(work.ok()) << work.status();
    const absl::Status status = (*work)->Wait(absl::Seconds(60));
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_GE(took, op_timeout - absl::Milliseconds(100)) << status;
    EXPECT_LT(took, op_timeout + absl::Seconds(3)) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "recv")) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "#" + std::to_string(seq))) << status;
  });
  ExpectAllSucceeded(results);
}

TEST_P(FaultTest, RankKilledInALargeAllreduceFailsTheOthers) {
  const std::string backend = GetParam().backend;
  constexpr int kVictim = 1;
  constexpr size_t kCount = (size_t{64} << 20) / sizeof(float);  // 64 MiB
  const absl::Duration op_timeout = absl::Seconds(10);
  RunOptions run;
  run.timeout = absl::Seconds(150);
  auto results = RunRanks(
      GetParam().world_size,
      [&](int rank, int size) {
        auto comm = Connect(backend);
        ASSERT_NE(comm, nullptr);
        std::shared_ptr<Store> job = ConnectJobStore();
        ASSERT_NE(job, nullptr);
        std::vector<float> data(kCount, 1.0f);
        for (int iteration = 0; iteration < 20; ++iteration) {
          if (rank == kVictim && iteration == 2) {
            // Die with the op in flight: posted here, and every other rank
            // has posted it too (it says so in the store), so the transfer
            // is under way or waiting on this rank.
            AllreduceOptions options;
            options.timeout = op_timeout;
            auto work = comm->Allreduce(View(data), options);
            ASSERT_TRUE(work.ok()) << work.status();
            std::vector<std::string> posted;
            for (int r = 0; r < size; ++r) {
              if (r != kVictim) posted.push_back(absl::StrCat("fault_test/posted/", r));
            }
            ASSERT_TRUE(job->Wait(posted, absl::Seconds(60)).ok());
            raise(SIGKILL);
          }
          if (rank != kVictim && iteration == 2) {
            // Marked before posting: the op cannot finish without the victim.
            ASSERT_TRUE(job->Set(absl::StrCat("fault_test/posted/", rank), "1").ok());
          }
          absl::Duration took;
          const absl::Status status = RunAllreduce(*comm, data, op_timeout, &took);
          if (!status.ok()) {
            std::printf("rank %d: iteration %d failed after %s: %s\n", rank, iteration,
                        absl::FormatDuration(took).c_str(), status.ToString().c_str());
            std::fflush(stdout);
            EXPECT_NE(rank, kVictim);
            EXPECT_GE(iteration, 2);
            EXPECT_LT(took, op_timeout + absl::Seconds(5)) << status;
            EXPECT_TRUE(absl::StrContains(status.message(), "allreduce")) << status;
            return;
          }
        }
        ADD_FAILURE() << "rank " << rank << " never saw the victim die";
      },
      run);
  ASSERT_EQ(results.size(), static_cast<size_t>(GetParam().world_size));
  for (const RankResult& r : results) {
    if (r.rank == kVictim) {
      EXPECT_EQ(r.signal, SIGKILL) << r.output;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_FALSE(r.timed_out) << r.output;
      EXPECT_TRUE(absl::StrContains(r.output, "failed after")) << r.output;
    }
    std::printf("--- rank %d (%.2f s):\n%s", r.rank, r.seconds, r.output.c_str());
  }
}

TEST_P(FaultTest, AbortFailsPendingOpsAndUnblocksWaiters) {
  const std::string backend = GetParam().backend;
  const absl::Duration op_timeout = absl::Seconds(5);
  RunOptions run;
  run.timeout = absl::Seconds(90);
  auto results = RunRanks(
      GetParam().world_size,
      [&](int rank, int size) {
        auto comm = Connect(backend);
        ASSERT_NE(comm, nullptr);
        std::shared_ptr<Store> job = ConnectJobStore();
        ASSERT_NE(job, nullptr);
        // Every rank has its communicator before rank 0 aborts its own: when
        // Create returns on rank 0, the others may still be in their own
        // handshake (over UCX, ranks 1 and 2 with each other), and an abort
        // then fails their creation instead of their op ("peers died during
        // the hello: rank 0", seen once in CI).
        if (rank != 0) {
          ASSERT_TRUE(job->Set(absl::StrCat("fault_test/created/", rank), "1").ok());
        } else {
          std::vector<std::string> created;
          for (int r = 1; r < size; ++r) created.push_back(absl::StrCat("fault_test/created/", r));
          ASSERT_TRUE(job->Wait(created, absl::Seconds(60)).ok());
        }
        std::vector<float> data(1001, 1.0f);
        if (rank != 0) {
          // Arrive late: rank 0 has aborted and destroyed its communicator
          // (it says so in the store), so this op must fail too (its links
          // to rank 0 are gone), not hang.
          ASSERT_TRUE(job->Wait({"fault_test/aborted"}, absl::Seconds(60)).ok());
          absl::Duration took;
          const absl::Status status = RunAllreduce(*comm, data, op_timeout, &took);
          EXPECT_FALSE(status.ok());
          EXPECT_LT(took, op_timeout + absl::Seconds(4)) << status;
          return;
        }
        AllreduceOptions options;
        options.timeout = op_timeout;
        auto first = comm->Allreduce(View(data), options);
        ASSERT_TRUE(first.ok()) << first.status();
        std::vector<float> more(7, 1.0f);
        auto queued = comm->Allreduce(View(more), options);
        ASSERT_TRUE(queued.ok()) << queued.status();
        // The others wait for the abort, so `first` cannot finish before it:
        // its Wait ends only through Abort. The watchdog aborts once this
        // thread is about to wait (it may abort just before Wait starts;
        // Wait must then report the abort at once, which is also checked).
        std::atomic<bool> waiting{false};
        std::thread watchdog([&] {
          while (!waiting.load()) std::this_thread::yield();
          EXPECT_TRUE(comm->Abort().ok());
        });
        const absl::Time start = absl::Now();
        waiting.store(true);
        const absl::Status status = (*first)->Wait(absl::Seconds(60));
        const absl::Duration took = absl::Now() - start;
        watchdog.join();
        EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
        // The promise: ended by the abort, not by the op's deadline.
        EXPECT_LT(took, op_timeout) << "abort did not unblock the waiter";
        EXPECT_EQ((*queued)->Wait(absl::Seconds(5)).code(), absl::StatusCode::kAborted);
        // Later ops fail at once; destroying the communicator ends in time.
        auto later = comm->Allreduce(View(more), options);
        EXPECT_TRUE(!later.ok() || !(*later)->Wait(absl::Seconds(5)).ok());
        first->reset();
        queued->reset();
        if (later.ok()) later->reset();
        const absl::Time destroy = absl::Now();
        comm.reset();
        EXPECT_LT(absl::Now() - destroy, op_timeout + absl::Seconds(3));
        // Only now: with the communicator gone, its links are closed for good.
        EXPECT_TRUE(job->Set("fault_test/aborted", "1").ok());
      },
      run);
  ExpectAllSucceeded(results);
}

// A Work may outlive its Communicator (work.h). Rank 0 posts an allreduce
// that the others never join and destroys its communicator: waiting on the
// Work then reports, at once, that the communicator was destroyed before the
// op finished, instead of touching freed memory (which ASan would report).
// A Work that had completed keeps its result on every rank. A second
// communicator holds the other ranks back until rank 0 has looked.
TEST_P(FaultTest, WorkOutlivesItsCommunicator) {
  const std::string backend = GetParam().backend;
  RunOptions run;
  run.timeout = absl::Seconds(120);
  auto results = RunRanks(
      GetParam().world_size,
      [&](int rank, int size) {
        auto [comm, sync] = ConnectWithSync(backend);
        ASSERT_TRUE(comm != nullptr && sync != nullptr);
        std::vector<float> ones(5, 1.0f);
        auto done = comm->Allreduce(View(ones));
        ASSERT_TRUE(done.ok()) << done.status();
        ASSERT_TRUE((*done)->Wait(absl::Seconds(60)).ok());
        if (rank == 0) {
          std::vector<float> data(1001, 2.0f);
          // Without the abort, the waits below would end at this deadline,
          // with DEADLINE_EXCEEDED. (Gloo's worker thread still runs to it
          // before the plugin communicator can go, with the last Work.)
          AllreduceOptions options;
          options.timeout = absl::Seconds(5);
          auto running = comm->Allreduce(View(data), options);
          ASSERT_TRUE(running.ok()) << running.status();
          EXPECT_FALSE((*running)->Test()) << "the others never joined";
          // A waiter blocked in Wait() while the communicator goes: before
          // the fix, it woke up inside the destroyed backend communicator.
          absl::Status waited;
          std::atomic<pid_t> waiter_tid{0};
          std::atomic<bool> waiter_returned{false};
          std::thread waiter([&] {
            waiter_tid = static_cast<pid_t>(::syscall(SYS_gettid));
            waited = (*running)->Wait(absl::Seconds(60));
            waiter_returned = true;
          });
          while (!waiter_returned && (waiter_tid == 0 || !ThreadSleeps(waiter_tid))) {
            std::this_thread::yield();
          }
          comm.reset();
          waiter.join();
          EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
          EXPECT_TRUE(absl::StrContains(waited.message(), "allreduce #2")) << waited;
          EXPECT_TRUE(absl::StrContains(
              waited.message(), "the communicator was destroyed before this work finished"))
              << waited;
          EXPECT_TRUE((*running)->Test());
          EXPECT_EQ((*running)->status(), waited);
          EXPECT_EQ((*running)->Wait(absl::Seconds(1)), waited);
          running->reset();
        }
        // The others destroy theirs only now: rank 0's op failed for its own
        // destruction, not because a peer left.
        ASSERT_TRUE(Barrier(*sync));
        comm.reset();
        EXPECT_TRUE((*done)->Test());
        EXPECT_TRUE((*done)->Wait(absl::Seconds(1)).ok()) << (*done)->status();
        EXPECT_EQ(ones, std::vector<float>(5, static_cast<float>(size)));
        done->reset();
      },
      run);
  ExpectAllSucceeded(results);
}

// status() tells an op that is still running from one that failed because a
// peer left: the first is IsStillRunning() (kUnknown), the second kUnavailable.
// Rank 0 posts an allreduce that the others never join; once rank 0 has
// looked, the others leave (through a second communicator's barrier).
TEST_P(FaultTest, StatusTellsARunningOpFromADeadPeer) {
  const std::string backend = GetParam().backend;
  RunOptions run;
  run.timeout = absl::Seconds(120);
  auto results = RunRanks(
      GetParam().world_size,
      [&](int rank, int) {
        auto [comm, sync] = ConnectWithSync(backend);
        ASSERT_TRUE(comm != nullptr && sync != nullptr);
        std::vector<float> data(1001, 1.0f);
        absl::StatusOr<std::unique_ptr<Work>> running;
        if (rank == 0) {
          AllreduceOptions options;
          options.timeout = absl::Seconds(60);  // the peers leave long before
          running = comm->Allreduce(View(data), options);
          ASSERT_TRUE(running.ok()) << running.status();
          const absl::Status status = (*running)->status();
          EXPECT_TRUE(IsStillRunning(status)) << status;
          EXPECT_NE(status.code(), absl::StatusCode::kUnavailable) << status;
          EXPECT_TRUE(absl::StrContains(status.message(), "allreduce #1")) << status;
          EXPECT_TRUE(absl::StrContains(status.message(), "is still running")) << status;
        }
        ASSERT_TRUE(Barrier(*sync));
        if (rank != 0) return;  // leaves: its communicators close their links
        const absl::Status failed = (*running)->Wait(absl::Seconds(90));
        EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
        EXPECT_FALSE(IsStillRunning(failed)) << failed;
        EXPECT_EQ((*running)->status(), failed);
      },
      run);
  ExpectAllSucceeded(results);
}

TEST_P(FaultTest, UnsupportedOrInvalidOpsFailWithAClearMessage) {
  const std::string backend = GetParam().backend;
  auto results = RunRanks(GetParam().world_size, [&](int rank, int size) {
    auto comm = Connect(backend);
    ASSERT_NE(comm, nullptr);
    auto fails = [](absl::StatusOr<std::unique_ptr<Work>> work) {
      if (!work.ok()) return work.status();
      return (*work)->Wait(absl::Seconds(30));
    };
    std::vector<float> data(16, 1.0f);
    if (backend == "gloo") {
      // Gloo cannot touch device memory: a CUDA view must be refused, not
      // read as if it were host memory.
      const absl::Status cuda = fails(comm->Allreduce(
          View(data.data(), data.size(), DataType::kFloat32, Device::Cuda(0))));
      EXPECT_FALSE(cuda.ok());
      EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(cuda.message()), "cuda"))
          << cuda;
    }
    // An allgather whose recv is not send x world size.
    std::vector<float> recv(data.size() * size + 1);
    const absl::Status gather = fails(comm->Allgather(View(data), View(recv)));
    EXPECT_FALSE(gather.ok());
    EXPECT_TRUE(absl::StrContains(gather.message(), "allgather")) << gather;
    // Send and recv of different dtypes.
    std::vector<int32_t> ints(16);
    const absl::Status mixed = fails(comm->Allreduce(View(data), View(ints)));
    EXPECT_FALSE(mixed.ok());
    // None of that broke the communicator.
    std::vector<float> ok(3, static_cast<float>(rank));
    ASSERT_TRUE(fails(comm->Allreduce(View(ok))).ok());
    EXPECT_EQ(ok[0], static_cast<float>(size * (size - 1) / 2));
  });
  ExpectAllSucceeded(results);
}

INSTANTIATE_TEST_SUITE_P(Backends, FaultTest, ::testing::ValuesIn(BackendCases({3})),
                         BackendCaseName);

}  // namespace
}  // namespace syncline::testing
