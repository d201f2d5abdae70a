// The NCCL backend on real GPUs: every op and dtype on CUDA buffers checked
// against the oracle of collective_util.h, ordering after the caller's
// stream, many ops in flight, and the failure paths (an op past its
// deadline, Abort, a rank that never joins init). Parameterized by world
// size; NCCL needs one GPU per rank, so a case skips (with the reason) when
// the machine has fewer GPUs than ranks, and every case skips without a GPU.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/nccl/nccl_test_util.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kWaitLimit = absl::Seconds(120);

void ExpectDone(absl::StatusOr<std::unique_ptr<Work>> work, const std::string& what) {
  ASSERT_TRUE(work.ok()) << what << ": " << work.status();
  const absl::Status status = (*work)->Wait(kWaitLimit);
  ASSERT_TRUE(status.ok()) << what << ": " << status;
}

std::string Label(const char* op, DataType dtype, size_t count, ReduceOp redop) {
  return std::string(op) + " " + DataTypeName(dtype) + " x " + std::to_string(count) +
         " " + ReduceOpName(redop);
}

// Blocks `stream` on the host for `ms`, standing in for a long kernel (or a
// wedged peer) without needing nvcc.
void BlockStream(cudaStream_t stream, int ms) {
  static int delay;
  delay = ms;
  ASSERT_EQ(cudaLaunchHostFunc(
                stream, [](void* p) { usleep(1000 * *static_cast<int*>(p)); }, &delay),
            cudaSuccess);
}

std::string SkipReason(int world_size) {
  std::string why;
  const int gpus = CudaDevices(&why);
  if (gpus == 0) return why;
  if (world_size > gpus) {
    return "needs " + std::to_string(world_size) + " GPUs (NCCL needs one per rank); " +
           "this machine has " + std::to_string(gpus);
  }
  return "";
}

class NcclCollectiveTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const std::string why = SkipReason(GetParam());
    if (!why.empty()) GTEST_SKIP() << why;
  }

  // Runs `body(comm, rank, size, stream)` on GetParam() processes, rank r on
  // cuda:r, with a fresh non-blocking stream of the caller's.
  void RunOnRanks(std::function<void(Communicator&, int, int, cudaStream_t)> body,
                  const std::string& backend_options = "") {
    RunOptions options;
    options.timeout = absl::Seconds(280);
    auto results = RunRanks(
        GetParam(),
        [&](int rank, int size) {
          ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
          CommunicatorOptions o;
          o.backend = "nccl";
          o.device = Device::Cuda(rank);
          o.timeout = absl::Seconds(60);
          o.backend_options = backend_options;
          auto comm = Communicator::Create(o);
          ASSERT_TRUE(comm.ok()) << comm.status();
          cudaStream_t stream = nullptr;
          ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                    cudaSuccess);
          body(**comm, rank, size, stream);
          (void)cudaStreamSynchronize(stream);
          comm->reset();
          (void)cudaStreamDestroy(stream);
        },
        options);
    ExpectAllSucceeded(results);
  }
};

TEST_P(NcclCollectiveTest, AllreduceEveryDtypeAndOp) {
  RunOnRanks([](Communicator& comm, int rank, int size, cudaStream_t stream) {
    int iteration = 0;
    for (DataType dtype : AllDataTypes()) {
      for (ReduceOp op : AllReduceOps()) {
        for (size_t count : TestCounts(dtype)) {
          const std::string what = Label("allreduce", dtype, count, op);
          TypedBuffer host(dtype, count);
          FillInput(host, op, rank);
          DeviceCopy send(dtype, count), recv(dtype, count);
          ASSERT_TRUE(send.ok() && recv.ok());
          send.Upload(host);
          const bool in_place = (iteration++ % 2) == 0;
          AllreduceOptions options;
          options.op = op;
          ExpectDone(in_place ? comm.Allreduce(send.View(rank, stream), options)
                              : comm.Allreduce(send.View(rank, stream),
                                               recv.View(rank, stream), options),
                     what);
          (in_place ? send : recv).Download(host);
          EXPECT_EQ(
              "", Compare(
                      host, [&](size_t i) { return ExpectedReduce(dtype, op, size, i); },
                      /*exact=*/false))
              << what << (in_place ? " in place" : "");
        }
      }
    }
  });
}

TEST_P(NcclCollectiveTest, DataMovementAndRootedOps) {
  RunOnRanks([](Communicator& comm, int rank, int size, cudaStream_t stream) {
    int iteration = 0;
    for (DataType dtype : AllDataTypes()) {
      for (size_t count : {size_t{1}, size_t{1001}}) {
        const int root = iteration++ % size;
        // Broadcast: non-roots start from other values, so a no-op fails.
        TypedBuffer host(dtype, count);
        FillInput(host, ReduceOp::kSum, rank == root ? root : rank + 100);
        DeviceCopy buffer(dtype, count);
        buffer.Upload(host);
        BroadcastOptions bopt;
        bopt.root = root;
        ExpectDone(comm.Broadcast(buffer.View(rank, stream), bopt), "broadcast");
        buffer.Download(host);
        EXPECT_EQ(
            "", Compare(
                    host,
                    [&](size_t i) { return InputValue(dtype, ReduceOp::kSum, root, i); },
                    true))
            << "broadcast " << DataTypeName(dtype) << " root " << root;

        // Reduce (max) to the root.
        FillInput(host, ReduceOp::kMax, rank);
        DeviceCopy send(dtype, count), recv(dtype, count);
        send.Upload(host);
        ReduceOptions ropt;
        ropt.op = ReduceOp::kMax;
        ropt.root = root;
        ExpectDone(comm.Reduce(send.View(rank, stream), recv.View(rank, stream), ropt),
                   "reduce");
        if (rank == root) {
          recv.Download(host);
          EXPECT_EQ("", Compare(
                            host,
                            [&](size_t i) {
                              return ExpectedReduce(dtype, ReduceOp::kMax, size, i);
                            },
                            false))
              << "reduce max " << DataTypeName(dtype);
        }

        // Allgather: rank r's block at r * count.
        TypedBuffer mine(dtype, count), all(dtype, count * size);
        FillInput(mine, ReduceOp::kSum, rank);
        DeviceCopy dmine(dtype, count), dall(dtype, count * size);
        dmine.Upload(mine);
        ExpectDone(comm.Allgather(dmine.View(rank, stream), dall.View(rank, stream)),
                   "allgather");
        dall.Download(all);
        EXPECT_EQ("", Compare(
                          all,
                          [&](size_t i) {
                            return InputValue(dtype, ReduceOp::kSum,
                                              static_cast<int>(i / count), i % count);
                          },
                          true))
            << "allgather " << DataTypeName(dtype);

        // Reduce-scatter (avg): this rank's block of the reduction.
        TypedBuffer big(dtype, count * size), part(dtype, count);
        FillInput(big, ReduceOp::kAvg, rank);
        DeviceCopy dbig(dtype, count * size), dpart(dtype, count);
        dbig.Upload(big);
        ReduceScatterOptions sopt;
        sopt.op = ReduceOp::kAvg;
        ExpectDone(
            comm.ReduceScatter(dbig.View(rank, stream), dpart.View(rank, stream), sopt),
            "reduce_scatter");
        dpart.Download(part);
        EXPECT_EQ("", Compare(
                          part,
                          [&](size_t i) {
                            return ExpectedReduce(dtype, ReduceOp::kAvg, size,
                                                  rank * count + i);
                          },
                          false))
            << "reduce_scatter avg " << DataTypeName(dtype);

        // Alltoall: block j of rank r's send is InputValue(r, j * count + i).
        TypedBuffer out(dtype, count * size), in(dtype, count * size);
        FillInput(out, ReduceOp::kSum, rank);
        DeviceCopy dout(dtype, count * size), din(dtype, count * size);
        dout.Upload(out);
        ExpectDone(comm.Alltoall(dout.View(rank, stream), din.View(rank, stream)),
                   "alltoall");
        din.Download(in);
        EXPECT_EQ("", Compare(
                          in,
                          [&](size_t i) {
                            return InputValue(dtype, ReduceOp::kSum,
                                              static_cast<int>(i / count),
                                              rank * count + i % count);
                          },
                          true))
            << "alltoall " << DataTypeName(dtype);
      }
    }
    ExpectDone(comm.Barrier(), "barrier");
    if (size < 2) return;
    // Send/recv around the ring: even ranks send first, so no pair deadlocks.
    TypedBuffer out(DataType::kBFloat16, 777), in(DataType::kBFloat16, 777);
    FillInput(out, ReduceOp::kSum, rank);
    DeviceCopy dout(DataType::kBFloat16, 777), din(DataType::kBFloat16, 777);
    dout.Upload(out);
    const int next = (rank + 1) % size;
    const int prev = (rank + size - 1) % size;
    if (rank % 2 == 0) {
      ExpectDone(comm.Send(dout.View(rank, stream), next), "send");
      ExpectDone(comm.Recv(din.View(rank, stream), prev), "recv");
    } else {
      ExpectDone(comm.Recv(din.View(rank, stream), prev), "recv");
      ExpectDone(comm.Send(dout.View(rank, stream), next), "send");
    }
    din.Download(in);
    EXPECT_EQ("", Compare(
                      in,
                      [&](size_t i) {
                        return InputValue(DataType::kBFloat16, ReduceOp::kSum, prev, i);
                      },
                      true));
  });
}

TEST_P(NcclCollectiveTest, OpWaitsForTheCallersStream) {
  RunOnRanks([](Communicator& comm, int rank, int size, cudaStream_t stream) {
    constexpr size_t kCount = 4096;
    // Pinned, so that the copy below is truly asynchronous (a copy from
    // pageable memory would wait for the stream on the host first).
    float* pinned_host = nullptr;
    ASSERT_EQ(
        cudaMallocHost(reinterpret_cast<void**>(&pinned_host), kCount * sizeof(float)),
        cudaSuccess);
    std::fill(pinned_host, pinned_host + kCount, static_cast<float>(rank + 1));
    DeviceCopy buffer(DataType::kFloat32, kCount);
    ASSERT_EQ(cudaMemset(buffer.View(rank).data, 0, kCount * 4), cudaSuccess);
    // The input lands only after a 300 ms stall on the caller's stream; an op
    // that did not wait for that stream would reduce zeros.
    BlockStream(stream, 300);
    ASSERT_EQ(cudaMemcpyAsync(buffer.View(rank).data, pinned_host, kCount * 4,
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ExpectDone(comm.Allreduce(buffer.View(rank, stream)), "allreduce after a stall");
    (void)cudaFreeHost(pinned_host);
    TypedBuffer host(DataType::kFloat32, kCount);
    buffer.Download(host);
    const double want = size * (size + 1) / 2.0;
    EXPECT_EQ("", Compare(
                      host, [&](size_t) { return want; }, true));
  });
}

TEST_P(NcclCollectiveTest, ManyOpsInFlight) {
  RunOnRanks([](Communicator& comm, int rank, int size, cudaStream_t stream) {
    constexpr int kInFlight = 16;
    std::vector<std::unique_ptr<DeviceCopy>> buffers;
    std::vector<std::unique_ptr<Work>> works;
    for (int k = 0; k < kInFlight; ++k) {
      TypedBuffer host(DataType::kInt32, 1001 + k);
      FillInput(host, ReduceOp::kSum, rank + k);
      buffers.push_back(std::make_unique<DeviceCopy>(DataType::kInt32, 1001 + k));
      buffers.back()->Upload(host);
      auto work = comm.Allreduce(buffers.back()->View(rank, stream));
      ASSERT_TRUE(work.ok()) << work.status();
      works.push_back(std::move(work).value());
    }
    for (int k = kInFlight - 1; k >= 0; --k) {
      ASSERT_TRUE(works[k]->Wait(kWaitLimit).ok()) << works[k]->Describe();
      TypedBuffer host(DataType::kInt32, 1001 + k);
      buffers[k]->Download(host);
      EXPECT_EQ("", Compare(
                        host,
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

TEST_P(NcclCollectiveTest, HostBufferIsRefused) {
  RunOnRanks([](Communicator& comm, int, int, cudaStream_t) {
    std::vector<float> host(8, 1.0f);
    auto work = comm.Allreduce(View(host));
    ASSERT_FALSE(work.ok());
    EXPECT_THAT(std::string(work.status().message()), HasSubstr("cuda"));
  });
}

TEST_P(NcclCollectiveTest, OpPastItsDeadlineFailsWithItsSeqAndBreaksTheComm) {
  RunOnRanks(
      [](Communicator& comm, int rank, int, cudaStream_t stream) {
        DeviceCopy buffer(DataType::kFloat32, 64);
        ExpectDone(comm.Allreduce(buffer.View(rank, stream)), "warm-up");
        BlockStream(stream, 3000);  // the op cannot start for 3 s
        AllreduceOptions options;
        options.timeout = absl::Milliseconds(500);
        const uint64_t seq = comm.next_seq();
        auto work = comm.Allreduce(buffer.View(rank, stream), options);
        ASSERT_TRUE(work.ok()) << work.status();
        const absl::Time start = absl::Now();
        const absl::Status status = (*work)->Wait(absl::Seconds(60));
        // The failure arrives once ncclCommAbort has returned, which may wait for
        // the stalled stream (3 s); the point is that it arrives, with the seq.
        EXPECT_LT(absl::Now() - start, absl::Seconds(20))
            << "the watchdog must end the op";
        EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
        EXPECT_THAT(std::string(status.message()),
                    AllOf(HasSubstr("allreduce #" + std::to_string(seq)),
                          HasSubstr("timed out"), HasSubstr("aborted")));
        auto later = comm.Allreduce(buffer.View(rank, stream));
        ASSERT_FALSE(later.ok());
        EXPECT_THAT(std::string(later.status().message()), HasSubstr("earlier failure"));
      },
      "watchdog_ms=5");
}

TEST_P(NcclCollectiveTest, AbortFailsPendingOps) {
  RunOnRanks([](Communicator& comm, int rank, int, cudaStream_t stream) {
    DeviceCopy buffer(DataType::kFloat32, 64);
    BlockStream(stream, 1500);
    auto work = comm.Allreduce(buffer.View(rank, stream));
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE(comm.Abort().ok());
    const absl::Status status = (*work)->Wait(absl::Seconds(60));
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("aborted"));
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, NcclCollectiveTest, ::testing::Values(1, 2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// One rank of two calls comm_create; the other never comes. Init must fail
// at the deadline and name the missing rank, on a single GPU.
TEST(NcclInit, MissingRankIsNamedAtTheDeadline) {
  const std::string why = SkipReason(1);
  if (!why.empty()) GTEST_SKIP() << why;
  std::string load_error;
  const sl_backend_v1_t* table = LoadNcclTable(&load_error);
  ASSERT_NE(table, nullptr) << load_error;
  MemoryStore store;
  const sl_store_t cstore = store.table();
  sl_comm_config_t config{0, 2, &cstore, SL_DEVICE_CUDA, 0, 3000, 99, nullptr};
  sl_comm_t* comm = nullptr;
  sl_error_t err{};
  const absl::Time start = absl::Now();
  EXPECT_EQ(table->comm_create(&config, &comm, &err), SL_ERR_TIMEOUT) << err.message;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(comm, nullptr);
  EXPECT_THAT(err.message, AllOf(HasSubstr("NCCL init did not finish"),
                                 HasSubstr("ranks [1] never started NCCL init")));
}

}  // namespace
}  // namespace syncline::testing
