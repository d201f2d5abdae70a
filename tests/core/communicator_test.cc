// communicator_test.cc: backend agreement and input validation in the core.
#include <cstdio>

#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using testing::RunOptions;
using testing::RunRanks;

TEST(BackendAgreement, ARankThatCannotLoadItsBackendFailsEveryRank) {
  RunOptions options{.timeout = absl::Seconds(30),
                     .rank_env = {{1, {{"SYNCLINE_BACKEND", "nosuch"}}}}};
  options.env["SYNCLINE_BACKEND"] = "gloo";
  options.env["SYNCLINE_TIMEOUT"] = "20";
  auto results = RunRanks(2, [](int, int) {
    auto comm = Communicator::Create({});
    std::fprintf(stderr, "RESULT: %s\n", comm.status().ToString().c_str());
    std::fflush(stderr);
    ::_exit(comm.ok() ? 0 : 3);
  }, options);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].exit_code, 3) << results[0].output;
  EXPECT_THAT(results[0].output, HasSubstr("rank 1 could not load its backend"));
  EXPECT_EQ(results[1].exit_code, 3) << results[1].output;
  EXPECT_THAT(results[1].output, HasSubstr("cannot load backend 'nosuch'"));
  for (const auto& r : results) EXPECT_LT(r.seconds, 5.0) << "must not wait for the timeout";
}

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CommunicatorOptions options;
    options.rank = 0;
    options.world_size = 1;
    options.backend = "gloo";
    auto comm = Communicator::Create(options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = std::move(comm).value();
  }
  std::unique_ptr<Communicator> comm_;
};

TEST_F(ValidationTest, MismatchedCountsNameTheOpAndSequenceNumber) {
  std::vector<float> a(4), b(5);
  auto w = comm_->Allreduce(View(a), View(b));
  ASSERT_TRUE(absl::IsInvalidArgument(w.status())) << w.status();
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("allreduce #1 (f32 x 4, sum)"));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("recv has 5"));
  auto g = comm_->Allgather(View(a), View(b));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("allgather #2"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("send.count * size = 4"));
}

TEST_F(ValidationTest, RootAndPeerOutOfRange) {
  std::vector<int32_t> a(4);
  auto w = comm_->Broadcast(View(a), {.root = 3});
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("root 3 is not a rank"));
  auto s = comm_->Send(View(a), 0);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("peer 0 must be another rank"));
}

TEST_F(ValidationTest, CudaBufferOnACpuBackendSaysWhichBackendAcceptsIt) {
  std::vector<float> a(4);
  BufferView v = View(a);
  v.device = Device::Cuda(0);
  auto w = comm_->Allreduce(v);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("the buffer is on cuda:0"));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("SYNCLINE_BACKEND=nccl"));
}

TEST_F(ValidationTest, SequenceNumbersAdvancePerOp) {
  std::vector<double> a = {1, 2, 3};
  auto w1 = comm_->Allreduce(View(a));
  ASSERT_TRUE(w1.ok()) << w1.status();
  ASSERT_TRUE((*w1)->Wait(absl::Seconds(5)).ok());
  auto w2 = comm_->Barrier();
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ((*w1)->seq(), 1u);
  EXPECT_EQ((*w2)->seq(), 2u);
  EXPECT_THAT((*w2)->Describe(), HasSubstr("barrier #2 on rank 0/1 over gloo"));
  EXPECT_EQ(a, (std::vector<double>{1, 2, 3}));  // world size 1: identity
}

}  // namespace
}  // namespace syncline
