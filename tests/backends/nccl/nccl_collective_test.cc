// The NCCL backend on real GPUs: every op and dtype on CUDA buffers checked
// against the oracle of collective_util.h, ordering after the caller's
// stream, Work::WaitStream (a device-side wait), many ops in flight, Split,
// and the failure paths (an op past its deadline, Abort, an abort that
// reaches the other ranks through the store, a rank that never joins init).
// Parameterized by world size; NCCL needs one GPU per rank, so a case skips
// (with the reason) when the machine has fewer GPUs than ranks, and every
// case skips without a GPU.
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

// Work::WaitStream: the caller's stream waits for the op on the device and
// the host does not. The op is held back 1 s (its input stream is stalled);
// WaitStream must return at once, and a copy queued on another stream right
// after it must still read the reduced result, not the zeros that were
// there before. The Work is dropped before the result is read: the backend
// keeps what the op needs until it ends.
TEST_P(NcclCollectiveTest, WaitStreamOrdersTheCallersStreamWithoutBlockingTheHost) {
  RunOnRanks([](Communicator& comm, int rank, int size, cudaStream_t stream) {
    constexpr size_t kCount = 1 << 20;
    DeviceCopy send(DataType::kFloat32, kCount), recv(DataType::kFloat32, kCount);
    ASSERT_TRUE(send.ok() && recv.ok());
    TypedBuffer input(DataType::kFloat32, kCount);
    for (size_t i = 0; i < kCount; ++i) input.Set(i, rank + 1);
    send.Upload(input);
    ASSERT_EQ(cudaMemset(recv.View(rank).data, 0, recv.bytes()), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaStream_t reader = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking), cudaSuccess);
    float* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), recv.bytes()), cudaSuccess);

    BlockStream(stream, 1000);
    auto work = comm.Allreduce(send.View(rank, stream), recv.View(rank, stream),
                                AllreduceOptions());
    ASSERT_TRUE(work.ok()) << work.status();
    const absl::Time start = absl::Now();
    const absl::Status status = (*work)->WaitStream(reader);
    const absl::Duration host_wait = absl::Now() - start;
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_LT(host_wait, absl::Milliseconds(250)) << "WaitStream blocked the host";
    EXPECT_FALSE((*work)->Test()) << "the op cannot have run: its input stream is stalled";
    ASSERT_EQ(cudaMemcpyAsync(pinned, recv.View(rank).data, recv.bytes(),
                              cudaMemcpyDeviceToHost, reader),
              cudaSuccess);
    work->reset();  // freed while running
    ASSERT_EQ(cudaStreamSynchronize(reader), cudaSuccess);
    const float want = static_cast<float>(size * (size + 1) / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < kCount; ++i) wrong += pinned[i] != want;
    EXPECT_EQ(wrong, 0u) << "the reader saw " << pinned[0] << ", want " << want
                         << ": it did not wait for the allreduce";
    (void)cudaFreeHost(pinned);
    (void)cudaStreamDestroy(reader);
  });
}

// Rank 0's op passes its deadline (its stream is stalled), so rank 0's
// watchdog aborts and publishes an abort record. `talking` ranks are blocked
// in an allreduce with rank 0 (with a 120 s deadline); the others are idle.
// Every other rank must fail within seconds, naming rank 0 and its op.
void ExpectPeersLearnOfRankZerosAbort(Communicator& comm, int rank, cudaStream_t stream,
                                      bool talking) {
  DeviceCopy buffer(DataType::kFloat32, 1024);
  ExpectDone(comm.Allreduce(buffer.View(rank, stream)), "warm-up");
  const uint64_t seq = comm.next_seq();
  const std::string first = "rank 0 aborted first, at allreduce #" + std::to_string(seq);
  if (rank == 0) {
    BlockStream(stream, 1000);
    AllreduceOptions options;
    options.timeout = absl::Milliseconds(300);
    auto work = comm.Allreduce(buffer.View(rank, stream), options);
    ASSERT_TRUE(work.ok()) << work.status();
    const absl::Status status = (*work)->Wait(absl::Seconds(60));
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    absl::SleepFor(absl::Seconds(6));  // stay up while the others check
    return;
  }
  const absl::Time start = absl::Now();
  if (talking) {
    AllreduceOptions options;
    options.timeout = absl::Seconds(120);
    auto work = comm.Allreduce(buffer.View(rank, stream), options);
    ASSERT_TRUE(work.ok()) << work.status();
    const absl::Status status = (*work)->Wait(absl::Seconds(60));
    ASSERT_FALSE(status.ok());
    EXPECT_THAT(std::string(status.message()), HasSubstr(first)) << status;
  } else {
    // Idle: NCCL has no way to tell this rank; only the store does. Its
    // next op must be refused at once with rank 0's story.
    absl::SleepFor(absl::Seconds(4));
    auto later = comm.Allreduce(buffer.View(rank, stream));
    ASSERT_FALSE(later.ok()) << "rank " << rank << " never heard of rank 0's abort";
    EXPECT_THAT(std::string(later.status().message()),
                AllOf(HasSubstr("earlier failure"), HasSubstr(first)));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "not told through the store";
}

TEST_P(NcclCollectiveTest, AbortReachesPeersBlockedInAnOpThroughTheStore) {
  if (GetParam() < 2) GTEST_SKIP() << "needs two ranks";
  RunOnRanks(
      [](Communicator& comm, int rank, int, cudaStream_t stream) {
        ExpectPeersLearnOfRankZerosAbort(comm, rank, stream, /*talking=*/true);
      },
      "watchdog_ms=5;abort_poll_ms=100");
}

TEST_P(NcclCollectiveTest, AbortReachesIdlePeersThroughTheStore) {
  if (GetParam() < 2) GTEST_SKIP() << "needs two ranks";
  RunOnRanks(
      [](Communicator& comm, int rank, int, cudaStream_t stream) {
        ExpectPeersLearnOfRankZerosAbort(comm, rank, stream, /*talking=*/false);
      },
      "watchdog_ms=5;abort_poll_ms=100");
}

// Split: ranks split by parity, reduce in the child, and get the sum over
// their half only (through comm_split when the core uses it, or through
// comm_create otherwise: the result must be the same).
TEST_P(NcclCollectiveTest, SplitByParityReducesWithinEachHalf) {
  if (GetParam() < 2) GTEST_SKIP() << "needs two ranks";
  RunOnRanks([](Communicator& comm, int rank, int size, cudaStream_t stream) {
    auto child = comm.Split(rank % 2, rank);
    ASSERT_TRUE(child.ok()) << child.status();
    ASSERT_NE(*child, nullptr);
    int want_size = 0;
    double want_sum = 0;
    for (int r = rank % 2; r < size; r += 2) {
      ++want_size;
      want_sum += r + 1;
    }
    EXPECT_EQ((*child)->size(), want_size);
    EXPECT_EQ((*child)->rank(), rank / 2);
    DeviceCopy buffer(DataType::kFloat64, 257);
    TypedBuffer host(DataType::kFloat64, 257);
    for (size_t i = 0; i < 257; ++i) host.Set(i, rank + 1);
    buffer.Upload(host);
    ExpectDone((*child)->Allreduce(buffer.View(rank, stream)), "allreduce in the child");
    buffer.Download(host);
    EXPECT_EQ("", Compare(host, [&](size_t) { return want_sum; }, true));
    // The parent still works after the split.
    ExpectDone(comm.Barrier(), "barrier on the parent");
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
  const sl_backend_t* table = LoadNcclTable(&load_error);
  ASSERT_NE(table, nullptr) << load_error;
  MemoryStore store;
  const sl_store_t cstore = store.table();
  sl_comm_config_t config{sizeof(sl_comm_config_t), 0, 2, &cstore, SL_DEVICE_CUDA, 0, 3000,
                          99, nullptr};
  sl_comm_t* comm = nullptr;
  sl_error_t err{};
  const absl::Time start = absl::Now();
  EXPECT_EQ(table->comm_create(table->ctx, &config, &comm, &err), SL_ERR_TIMEOUT) << err.message;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(comm, nullptr);
  EXPECT_THAT(err.message, AllOf(HasSubstr("NCCL init did not finish"),
                                 HasSubstr("ranks [1] never started NCCL init")));
}

// comm_split straight through the plugin's table, on one GPU: a negative
// color takes part and gets no child; a color gets a working child.
TEST(NcclSplit, OneRankSplitsThroughTheTable) {
  const std::string why = SkipReason(1);
  if (!why.empty()) GTEST_SKIP() << why;
  std::string load_error;
  const sl_backend_t* table = LoadNcclTable(&load_error);
  ASSERT_NE(table, nullptr) << load_error;
  if (table->comm_split == nullptr) GTEST_SKIP() << "built against NCCL < 2.18";
  ASSERT_NE(table->request_stream_wait, nullptr);
  MemoryStore store, child_store;
  const sl_store_t cstore = store.table();
  const sl_store_t child_cstore = child_store.table();
  sl_comm_config_t config{sizeof(sl_comm_config_t), 0, 1, &cstore, SL_DEVICE_CUDA, 0, 30000,
                          7, nullptr};
  sl_comm_t* parent = nullptr;
  sl_error_t err{};
  ASSERT_EQ(table->comm_create(table->ctx, &config, &parent, &err), SL_OK) << err.message;
  sl_comm_t* child = reinterpret_cast<sl_comm_t*>(&err);  // must be reset
  EXPECT_EQ(table->comm_split(parent, -1, 0, &child_cstore, 8, &child, &err), SL_OK)
      << err.message;
  EXPECT_EQ(child, nullptr);
  ASSERT_EQ(table->comm_split(parent, 3, 0, &child_cstore, 9, &child, &err), SL_OK)
      << err.message;
  ASSERT_NE(child, nullptr);
  DeviceCopy buffer(DataType::kInt32, 16);
  ASSERT_TRUE(buffer.ok());
  TypedBuffer host(DataType::kInt32, 16);
  for (size_t i = 0; i < 16; ++i) host.Set(i, static_cast<double>(i));
  buffer.Upload(host);
  sl_op_t op = sl_op_init(SL_OP_ALLREDUCE);
  op.seq = 1;
  op.send = sl_buffer_t{buffer.View(0).data, 16, SL_I32, SL_DEVICE_CUDA, 0, nullptr};
  op.recv = op.send;
  op.redop = SL_SUM;
  op.timeout_ms = 30000;
  sl_request_t* request = nullptr;
  ASSERT_EQ(table->post(child, &op, &request, &err), SL_OK) << err.message;
  EXPECT_EQ(table->request_stream_wait(request, nullptr, &err), SL_OK) << err.message;
  EXPECT_EQ(table->request_wait(request, 30000, &err), SL_OK) << err.message;
  table->request_free(request);
  buffer.Download(host);
  EXPECT_EQ("", Compare(host, [](size_t i) { return static_cast<double>(i); }, true));
  table->comm_destroy(child);
  table->comm_destroy(parent);
  // A clean shutdown publishes no abort record.
  EXPECT_FALSE(child_store.Has("nccl/abort/record"));
  EXPECT_FALSE(store.Has("nccl/abort/record"));
}

}  // namespace
}  // namespace syncline::testing
