// The collective suite every backend must pass, parameterized over backend
// (backend_params.h) x world size {1, 2, 3, 4}. Each TEST spawns its ranks
// once (spawning is the expensive part) and, inside each rank, loops over
// dtype x reduce op x count {0, 1, 1001, ~2 MiB}, checking every result
// against an oracle computed locally from every rank's known input.
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/backend_params.h"
#include "backends/collective_util.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

constexpr absl::Duration kWaitLimit = absl::Seconds(120);

std::unique_ptr<Communicator> Connect(const std::string& backend) {
  CommunicatorOptions options;
  options.backend = backend;
  options.timeout = absl::Seconds(60);
  auto comm = Communicator::Create(options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

// Waits for `work` and reports a failure naming `what`.
void ExpectDone(absl::StatusOr<std::unique_ptr<Work>> work, const std::string& what) {
  ASSERT_TRUE(work.ok()) << what << ": " << work.status();
  const absl::Status status = (*work)->Wait(kWaitLimit);
  ASSERT_TRUE(status.ok()) << what << ": " << status;
}

std::string Label(const char* op, DataType dtype, size_t count,
                  ReduceOp redop = ReduceOp::kSum) {
  return std::string(op) + " " + DataTypeName(dtype) + " x " + std::to_string(count) +
         " " + ReduceOpName(redop);
}

class CollectiveTest : public ::testing::TestWithParam<BackendCase> {
 protected:
  // Runs `body(comm, rank, size)` on world_size processes.
  void RunOnRanks(std::function<void(Communicator&, int, int)> body) {
    const std::string backend = GetParam().backend;
    RunOptions options;
    options.timeout = absl::Seconds(280);
    auto results = RunRanks(
        GetParam().world_size,
        [&](int rank, int size) {
          auto comm = Connect(backend);
          ASSERT_NE(comm, nullptr);
          ASSERT_EQ(comm->rank(), rank);
          ASSERT_EQ(comm->size(), size);
          body(*comm, rank, size);
        },
        options);
    ExpectAllSucceeded(results);
  }
};

TEST_P(CollectiveTest, Allreduce) {
  RunOnRanks([](Communicator& comm, int rank, int size) {
    int iteration = 0;
    for (DataType dtype : AllDataTypes()) {
      for (ReduceOp op : AllReduceOps()) {
        for (size_t count : TestCounts(dtype)) {
          const std::string what = Label("allreduce", dtype, count, op);
          TypedBuffer send(dtype, count), recv(dtype, count);
          FillInput(send, op, rank);
          // Alternate in-place and out-of-place calls.
          const bool in_place = (iteration++ % 2) == 0;
          AllreduceOptions options;
          options.op = op;
          ExpectDone(in_place ? comm.Allreduce(send.View(), options)
                              : comm.Allreduce(send.View(), recv.View(), options),
                     what);
          const TypedBuffer& out = in_place ? send : recv;
          EXPECT_EQ("",
                    Compare(
                        out, [&](size_t i) { return ExpectedReduce(dtype, op, size, i); },
                        /*exact=*/false))
              << what << (in_place ? " in place" : "");
          if (!in_place) {
            EXPECT_EQ("",
                      Compare(
                          send, [&](size_t i) { return InputValue(dtype, op, rank, i); },
                          /*exact=*/true))
                << what << ": the send buffer changed";
          }
        }
      }
    }
    // Many ops in flight at once complete in order with the right results.
    constexpr int kInFlight = 16;
    std::vector<TypedBuffer> buffers;
    std::vector<std::unique_ptr<Work>> works;
    for (int k = 0; k < kInFlight; ++k) {
      buffers.emplace_back(DataType::kInt32, 1001 + k);
      FillInput(buffers.back(), ReduceOp::kSum, rank + k);
    }
    for (int k = 0; k < kInFlight; ++k) {
      auto work = comm.Allreduce(buffers[k].View());
      ASSERT_TRUE(work.ok()) << work.status();
      works.push_back(std::move(work).value());
    }
    for (int k = kInFlight - 1; k >= 0; --k) {
      ASSERT_TRUE(works[k]->Wait(kWaitLimit).ok()) << works[k]->Describe();
      EXPECT_EQ("", Compare(
                        buffers[k],
                        [&](size_t i) {
                          double sum = 0;
                          for (int r = 0; r < size; ++r) {
                            sum += InputValue(DataType::kInt32, ReduceOp::kSum, r + k, i);
                          }
                          return sum;
                        },
                        true))
          << "in-flight allreduce " << k;
    }
  });
}

TEST_P(CollectiveTest, BroadcastAndReduce) {
  RunOnRanks([](Communicator& comm, int rank, int size) {
    int iteration = 0;
    for (DataType dtype : AllDataTypes()) {
      for (size_t count : TestCounts(dtype)) {
        const int root = iteration++ % size;
        const std::string what =
            Label("broadcast", dtype, count) + " root " + std::to_string(root);
        TypedBuffer buffer(dtype, count);
        // Non-roots start from other values, so a no-op cannot pass.
        FillInput(buffer, ReduceOp::kSum, rank == root ? root : rank + 100);
        BroadcastOptions options;
        options.root = root;
        ExpectDone(comm.Broadcast(buffer.View(), options), what);
        EXPECT_EQ(
            "", Compare(
                    buffer,
                    [&](size_t i) { return InputValue(dtype, ReduceOp::kSum, root, i); },
                    true))
            << what;
      }
    }
    for (DataType dtype : AllDataTypes()) {
      for (ReduceOp op : AllReduceOps()) {
        for (size_t count : TestCounts(dtype)) {
          const int root = iteration++ % size;
          const std::string what =
              Label("reduce", dtype, count, op) + " root " + std::to_string(root);
          TypedBuffer send(dtype, count), recv(dtype, count);
          FillInput(send, op, rank);
          FillInput(recv, ReduceOp::kSum, rank + 200);  // sentinel values
          ReduceOptions options;
          options.op = op;
          options.root = root;
          ExpectDone(comm.Reduce(send.View(), recv.View(), options), what);
          if (rank == root) {
            EXPECT_EQ(
                "",
                Compare(
                    recv, [&](size_t i) { return ExpectedReduce(dtype, op, size, i); },
                    false))
                << what;
          } else {
            EXPECT_EQ("", Compare(
                              recv,
                              [&](size_t i) {
                                return InputValue(dtype, ReduceOp::kSum, rank + 200, i);
                              },
                              true))
                << what << ": a non-root's recv was written";
          }
          EXPECT_EQ(
              "",
              Compare(
                  send, [&](size_t i) { return InputValue(dtype, op, rank, i); }, true))
              << what << ": the send buffer changed";
        }
      }
    }
  });
}

TEST_P(CollectiveTest, AllgatherAndAlltoall) {
  RunOnRanks([](Communicator& comm, int rank, int size) {
    for (DataType dtype : AllDataTypes()) {
      for (size_t total : TestCounts(dtype)) {
        // Keep each rank's whole buffer near the target size.
        const size_t n = total > 1001 ? total / size : total;
        const std::string what = Label("allgather", dtype, n);
        TypedBuffer send(dtype, n), recv(dtype, n * size);
        FillInput(send, ReduceOp::kSum, rank);
        ExpectDone(comm.Allgather(send.View(), recv.View()), what);
        EXPECT_EQ("", Compare(
                          recv,
                          [&](size_t i) {
                            return InputValue(dtype, ReduceOp::kSum,
                                              static_cast<int>(i / n), i % n);
                          },
                          true))
            << what;

        const std::string what2 = Label("alltoall", dtype, n);
        TypedBuffer all_send(dtype, n * size), all_recv(dtype, n * size);
        FillInput(all_send, ReduceOp::kSum, rank);  // block j -> rank j
        ExpectDone(comm.Alltoall(all_send.View(), all_recv.View()), what2);
        // Block j of recv is block `rank` of rank j's send.
        EXPECT_EQ("", Compare(
                          all_recv,
                          [&](size_t i) {
                            return InputValue(dtype, ReduceOp::kSum,
                                              static_cast<int>(i / n), rank * n + i % n);
                          },
                          true))
            << what2;
      }
    }
  });
}

TEST_P(CollectiveTest, ReduceScatter) {
  RunOnRanks([](Communicator& comm, int rank, int size) {
    for (DataType dtype : AllDataTypes()) {
      for (ReduceOp op : AllReduceOps()) {
        for (size_t total : TestCounts(dtype)) {
          const size_t n = total > 1001 ? total / size : total;
          const std::string what = Label("reduce_scatter", dtype, n, op);
          TypedBuffer send(dtype, n * size), recv(dtype, n);
          FillInput(send, op, rank);
          ReduceScatterOptions options;
          options.op = op;
          ExpectDone(comm.ReduceScatter(send.View(), recv.View(), options), what);
          EXPECT_EQ("", Compare(
                            recv,
                            [&](size_t i) {
                              return ExpectedReduce(dtype, op, size, rank * n + i);
                            },
                            false))
              << what;
        }
      }
    }
  });
}

TEST_P(CollectiveTest, SendRecvRingAndBarrier) {
  RunOnRanks([](Communicator& comm, int rank, int size) {
    if (size > 1) {
      const int next = (rank + 1) % size;
      const int prev = (rank + size - 1) % size;
      for (DataType dtype : AllDataTypes()) {
        for (size_t count : TestCounts(dtype)) {
          const std::string what = Label("send/recv ring", dtype, count);
          // Two messages with different tags, received in the opposite
          // order to the one they were sent in: tags must match them.
          TypedBuffer out_a(dtype, count), out_b(dtype, count);
          TypedBuffer in_a(dtype, count), in_b(dtype, count);
          FillInput(out_a, ReduceOp::kSum, rank);
          FillInput(out_b, ReduceOp::kSum, rank + 50);
          SendRecvOptions tag_a, tag_b;
          tag_a.tag = 7;
          tag_b.tag = 8;
          auto recv_b = comm.Recv(in_b.View(), prev, tag_b);
          auto recv_a = comm.Recv(in_a.View(), prev, tag_a);
          auto send_a = comm.Send(out_a.View(), next, tag_a);
          auto send_b = comm.Send(out_b.View(), next, tag_b);
          ExpectDone(std::move(send_a), what + " send a");
          ExpectDone(std::move(send_b), what + " send b");
          ExpectDone(std::move(recv_a), what + " recv a");
          ExpectDone(std::move(recv_b), what + " recv b");
          EXPECT_EQ("", Compare(
                            in_a,
                            [&](size_t i) {
                              return InputValue(dtype, ReduceOp::kSum, prev, i);
                            },
                            true))
              << what << " tag 7";
          EXPECT_EQ("", Compare(
                            in_b,
                            [&](size_t i) {
                              return InputValue(dtype, ReduceOp::kSum, prev + 50, i);
                            },
                            true))
              << what << " tag 8";
        }
      }
    }
    // Barrier: nobody leaves before the last rank has arrived. The first
    // barrier of each round lines the ranks up so the timing is fair.
    for (int round = 0; round < 3; ++round) {
      const int late = round % size;
      ExpectDone(comm.Barrier(), "sync barrier");
      const absl::Time start = absl::Now();
      if (rank == late) absl::SleepFor(absl::Milliseconds(400));
      ExpectDone(comm.Barrier(), "barrier round " + std::to_string(round));
      EXPECT_GE(absl::Now() - start, absl::Milliseconds(300))
          << "barrier round " << round << " released before rank " << late << " arrived";
    }
  });
}

TEST_P(CollectiveTest, SplitIntoGroups) {
  RunOnRanks([](Communicator& comm, int rank, int size) {
    // Even and odd ranks form two groups, ordered by descending old rank;
    // with 4 ranks, rank 3 opts out (color < 0).
    const bool out = size == 4 && rank == 3;
    const int color = out ? -1 : rank % 2;
    auto child = comm.Split(color, /*key=*/-rank);
    ASSERT_TRUE(child.ok()) << child.status();
    if (out) {
      EXPECT_TRUE(*child == nullptr);
    } else {
      ASSERT_TRUE(*child != nullptr);
      std::vector<int> members;  // in the new order
      for (int r = size - 1; r >= 0; --r) {
        if (r % 2 == color && !(size == 4 && r == 3)) members.push_back(r);
      }
      Communicator& group = **child;
      ASSERT_EQ(group.size(), static_cast<int>(members.size()));
      int expected_rank = 0;
      while (members[expected_rank] != rank) ++expected_rank;
      EXPECT_EQ(group.rank(), expected_rank);
      // A collective inside the group: the sum of the members' old ranks.
      for (size_t count : {size_t{1}, size_t{1001}}) {
        std::vector<int64_t> data(count, rank);
        ExpectDone(group.Allreduce(View(data)), "group allreduce");
        int64_t want = 0;
        for (int m : members) want += m;
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(data[i], want) << "group " << color << " index " << i;
        }
      }
      // And an allgather, which shows the new rank order.
      std::vector<int32_t> mine(1, rank), all(members.size());
      ExpectDone(group.Allgather(View(mine), View(all)), "group allgather");
      for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(all[i], members[i]);
    }
    // The parent still works after the split.
    std::vector<float> data(17, 1.0f);
    ExpectDone(comm.Allreduce(View(data)), "parent allreduce after split");
    EXPECT_EQ(data[16], static_cast<float>(size));
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, CollectiveTest,
                         ::testing::ValuesIn(BackendCases({1, 2, 3, 4})),
                         BackendCaseName);

}  // namespace
}  // namespace syncline::testing
