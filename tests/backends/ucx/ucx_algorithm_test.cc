// The UCX backend over real processes: a 7-rank run (non-power-of-two and
// oversubscribed on small machines) of every collective, and every
// algorithm switch point exercised on both sides by forcing the thresholds
// through backend options, with sizes that straddle segment boundaries.
// Results are checked against the oracle of collective_util.h.
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "backends/collective_util.h"
#include "backends/ucx/algorithms/algorithms.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

constexpr absl::Duration kWait = absl::Seconds(120);

void Done(absl::StatusOr<std::unique_ptr<Work>> work, const std::string& what) {
  ASSERT_TRUE(work.ok()) << what << ": " << work.status();
  const absl::Status status = (*work)->Wait(kWait);
  ASSERT_TRUE(status.ok()) << what << ": " << status;
}

// Runs one of each collective (or only those named in `only`) at `count`
// elements per rank on `comm` and checks every result. `tag` labels
// failures.
void CheckAllCollectives(Communicator& comm, DataType dtype, size_t count,
                         const std::string& tag, const std::set<std::string>& only = {}) {
  const int rank = comm.rank(), size = comm.size();
  const std::string what = tag + " " + DataTypeName(dtype) + " x " + std::to_string(count);
  auto run = [&](const char* op) { return only.empty() || only.count(op) > 0; };
  if (run("allreduce")) {
    TypedBuffer buf(dtype, count);
    FillInput(buf, ReduceOp::kSum, rank);
    Done(comm.Allreduce(buf.View()), what + " allreduce");
    EXPECT_EQ("", Compare(
                      buf, [&](size_t i) { return ExpectedReduce(dtype, ReduceOp::kSum, size, i); },
                      false))
        << what << " allreduce";
  }
  if (run("allreduce")) {
    TypedBuffer send(dtype, count), recv(dtype, count);
    FillInput(send, ReduceOp::kAvg, rank);
    AllreduceOptions o;
    o.op = ReduceOp::kAvg;
    Done(comm.Allreduce(send.View(), recv.View(), o), what + " allreduce avg");
    EXPECT_EQ("", Compare(
                      recv, [&](size_t i) { return ExpectedReduce(dtype, ReduceOp::kAvg, size, i); },
                      false))
        << what << " allreduce avg";
  }
  const int root = size - 1;
  if (run("broadcast")) {
    TypedBuffer buf(dtype, count);
    FillInput(buf, ReduceOp::kSum, rank == root ? root : rank + 100);
    BroadcastOptions o;
    o.root = root;
    Done(comm.Broadcast(buf.View(), o), what + " broadcast");
    EXPECT_EQ("", Compare(
                      buf, [&](size_t i) { return InputValue(dtype, ReduceOp::kSum, root, i); },
                      true))
        << what << " broadcast";
  }
  if (run("reduce")) {
    TypedBuffer send(dtype, count), recv(dtype, count);
    FillInput(send, ReduceOp::kMax, rank);
    ReduceOptions o;
    o.op = ReduceOp::kMax;
    o.root = root;
    Done(comm.Reduce(send.View(), recv.View(), o), what + " reduce");
    if (rank == root) {
      EXPECT_EQ("", Compare(
                        recv,
                        [&](size_t i) { return ExpectedReduce(dtype, ReduceOp::kMax, size, i); },
                        false))
          << what << " reduce";
    }
  }
  if (run("allgather")) {
    TypedBuffer send(dtype, count), recv(dtype, count * size);
    FillInput(send, ReduceOp::kSum, rank);
    Done(comm.Allgather(send.View(), recv.View()), what + " allgather");
    EXPECT_EQ("", Compare(
                      recv,
                      [&](size_t i) {
                        return InputValue(dtype, ReduceOp::kSum, static_cast<int>(i / count),
                                          i % count);
                      },
                      true))
        << what << " allgather";
  }
  if (run("reduce_scatter")) {
    TypedBuffer send(dtype, count * size), recv(dtype, count);
    FillInput(send, ReduceOp::kSum, rank);
    Done(comm.ReduceScatter(send.View(), recv.View()), what + " reduce_scatter");
    EXPECT_EQ("", Compare(
                      recv,
                      [&](size_t i) {
                        return ExpectedReduce(dtype, ReduceOp::kSum, size, rank * count + i);
                      },
                      false))
        << what << " reduce_scatter";
  }
  if (run("alltoall")) {
    TypedBuffer send(dtype, count * size), recv(dtype, count * size);
    FillInput(send, ReduceOp::kSum, rank);
    Done(comm.Alltoall(send.View(), recv.View()), what + " alltoall");
    EXPECT_EQ("", Compare(
                      recv,
                      [&](size_t i) {
                        return InputValue(dtype, ReduceOp::kSum, static_cast<int>(i / count),
                                          rank * count + i % count);
                      },
                      true))
        << what << " alltoall";
  }
  if (run("barrier")) Done(comm.Barrier(), what + " barrier");
}

void RunWithOptions(int world_size, const std::string& backend_options,
                    const std::function<void(Communicator&)>& body) {
  RunOptions run;
  run.timeout = absl::Seconds(280);
  auto results = RunRanks(
      world_size,
      [&](int, int) {
        CommunicatorOptions options;
        options.backend = "ucx";
        options.timeout = absl::Seconds(90);
        options.backend_options = backend_options;
        auto comm = Communicator::Create(options);
        ASSERT_TRUE(comm.ok()) << comm.status();
        body(**comm);
      },
      run);
  ExpectAllSucceeded(results);
}

// Seven ranks: every collective, with the default thresholds, at sizes
// that select each algorithm (small, mid, and a multi-segment large).
TEST(UcxSevenRanks, EveryCollectiveAtEverySize) {
  RunWithOptions(7, "", [](Communicator& comm) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{3001}, size_t{70001}}) {
      CheckAllCollectives(comm, DataType::kFloat32, count, "7 ranks");
    }
    CheckAllCollectives(comm, DataType::kBFloat16, 1001, "7 ranks");
    CheckAllCollectives(comm, DataType::kInt64, 40000, "7 ranks");
  });
}

// Both sides of every switch point: thresholds forced to 0 (always the
// large-message algorithm) or to "infinite" (always the small one), a small
// segment size so pipelines have many uneven segments, on power-of-two and
// odd world sizes.
class UcxSwitchPoints : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(UcxSwitchPoints, BothAlgorithmsGiveTheSameResults) {
  const auto [world_size, small] = GetParam();
  const std::string t = small ? "1G" : "0";
  const std::string options = "allreduce_small_max=" + t + ";broadcast_small_max=" + t +
                              ";reduce_small_max=" + t + ";allgather_small_max=" + t +
                              ";reduce_scatter_small_max=" + t + ";chunk_bytes=4096";
  RunWithOptions(world_size, options, [&](Communicator& comm) {
    for (size_t count : {size_t{1}, size_t{1023}, size_t{1025}, size_t{12289}}) {
      CheckAllCollectives(comm, DataType::kFloat32, count, small ? "small algo" : "large algo");
      CheckAllCollectives(comm, DataType::kFloat16, count, small ? "small algo" : "large algo");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxSwitchPoints,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" +
                                  (std::get<1>(info.param) ? "small" : "large");
                         });

// The default switch points of 2, 3 and 4 ranks (they differ by world
// size; see backends/ucx/algorithms/select.cc): each op runs at exactly its
// default threshold (the latency algorithm) and one element above it (the
// bandwidth one), so both defaults run and are checked on every world size.
// ucx_unit_test checks which algorithm each side selects.
class UcxDefaultThresholds : public ::testing::TestWithParam<int> {};

TEST_P(UcxDefaultThresholds, EachOpAtAndAboveItsSwitchPoint) {
  const int world_size = GetParam();
  const std::pair<const char*, sl_op_kind_t> ops[] = {
      {"allreduce", SL_OP_ALLREDUCE},
      {"broadcast", SL_OP_BROADCAST},
      {"reduce", SL_OP_REDUCE},
      {"allgather", SL_OP_ALLGATHER},
      {"reduce_scatter", SL_OP_REDUCE_SCATTER}};
  RunWithOptions(world_size, "", [&](Communicator& comm) {
    for (const auto& [name, kind] : ops) {
      // What the backend decides for these ranks on this machine.
      const size_t threshold = ucx_backend::DefaultSmallMax(
          kind, world_size, ucx_backend::RanksOversubscribe(world_size));
      for (size_t count : {threshold / 4, threshold / 4 + 1}) {
        if (count == 0) continue;  // a threshold of 0: only the bandwidth side exists
        CheckAllCollectives(comm, DataType::kFloat32, count,
                            "default switch point of " + std::string(name), {name});
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxDefaultThresholds, ::testing::Values(2, 3, 4),
                         [](const auto& info) {
                           return std::to_string(info.param) + "ranks";
                         });

}  // namespace
}  // namespace syncline::testing
