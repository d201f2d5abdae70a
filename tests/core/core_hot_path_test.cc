// The core's share of an op's path (issue 16: Syncline's MPI backend adds at
// most 1 us over raw MPI for an 8-byte allreduce): heap allocations on the
// calling thread per op, from Communicator::Allreduce through the flight
// recorder, the plugin's post and wait and back to the Work's end. The
// backend is the one-rank fake (fake_plugins/), whose post makes exactly
// one allocation (its request), so whatever else is counted is the core's.
// Wall-clock time is no test here (the machine is shared); an allocation is
// a count. Every op's result is checked against its input (one rank: the
// sum over ranks is the input itself).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/counting_new.h"
#include "common/scoped_env.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/store.h"

namespace syncline::testing {
namespace {

class CoreHotPath : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_path_.emplace("SYNCLINE_PLUGIN_PATH", FAKE_PLUGIN_DIR);
    no_plugins_.emplace("SYNCLINE_PLUGINS", "");
    CommunicatorOptions options;
    options.rank = 0;
    options.world_size = 1;
    options.backend = "fakenosplit";
    options.store = MakeHashStore();
    auto comm = Communicator::Create(options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = std::move(comm).value();
  }
  void TearDown() override { comm_.reset(); }

  // One out-of-place allreduce of two floats, waited for and checked.
  void Run(int i) {
    float in[2] = {static_cast<float>(i % 7), static_cast<float>(-i % 5)};
    float out[2] = {-1, -1};
    auto work = comm_->Allreduce(View(in, 2), View(out, 2));
    ASSERT_TRUE(work.ok()) << work.status();
    const absl::Status waited = (*work)->Wait();
    ASSERT_TRUE(waited.ok()) << waited;
    ASSERT_EQ(out[0], in[0]) << "op " << i;
    ASSERT_EQ(out[1], in[1]) << "op " << i;
  }

  std::optional<ScopedEnv> plugin_path_, no_plugins_;
  std::unique_ptr<Communicator> comm_;
};

TEST_F(CoreHotPath, EightByteAllreduceMakesNoCoreAllocation) {
  // The fake's request is one allocation per op; the core's Work was a
  // second (before: 2 per op). The ring of the flight recorder grows to its
  // 1024 entries in a few steps, and those are the only others allowed.
  constexpr size_t kBackendAllocationsPerOp = 1;
  constexpr size_t kMaxGrowthAllocations = 50;
  constexpr int kWarmup = 100, kOps = 2000;
  for (int i = 0; i < kWarmup; ++i) Run(i);
  allocations = 0;
  counting = true;
  for (int i = 0; i < kOps && !HasFatalFailure(); ++i) Run(i);
  counting = false;
  std::printf("%.3f allocations per 8-byte allreduce, the fake backend's 1 included\n",
              static_cast<double>(allocations) / kOps);
  EXPECT_LE(allocations, kOps * kBackendAllocationsPerOp + kMaxGrowthAllocations)
      << "allocations per op: " << static_cast<double>(allocations) / kOps;
}

TEST_F(CoreHotPath, WorksKeptInFlightAndDroppedOnOtherThreadsStayIntact) {
  // More Works alive at once than a thread keeps recycled blocks for, and
  // dropped on threads other than the one that made them (and on threads
  // that then end): each still reads as its own op until it is dropped.
  constexpr int kInFlight = 40;
  std::vector<float> data(2 * kInFlight);
  std::vector<std::unique_ptr<Work>> works;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kInFlight; ++i) {
      data[2 * i] = static_cast<float>(round * 100 + i);
      data[2 * i + 1] = static_cast<float>(-i);
      auto work = comm_->Allreduce(View(&data[2 * i], 2));
      ASSERT_TRUE(work.ok()) << work.status();
      works.push_back(std::move(work).value());
    }
    const uint64_t first = works.front()->seq();
    for (int i = 0; i < kInFlight; ++i) {
      ASSERT_EQ(works[i]->seq(), first + i);
      ASSERT_TRUE(works[i]->Wait().ok());
      EXPECT_EQ(data[2 * i], static_cast<float>(round * 100 + i));
      EXPECT_NE(works[i]->Describe().find("#" + std::to_string(first + i) + " "),
                std::string::npos)
          << works[i]->Describe();
    }
    // Half are dropped by a thread that ends, half here; the next round's
    // Works reuse what this thread kept.
    std::thread dropper([&] {
      for (int i = 0; i < kInFlight / 2; ++i) works[i].reset();
      for (int i = 0; i < 5; ++i) Run(1000 + i);  // this thread posts too
    });
    dropper.join();
    works.clear();
  }
  Run(7);
}

}  // namespace
}  // namespace syncline::testing
