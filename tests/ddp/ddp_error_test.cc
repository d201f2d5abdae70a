// ddp_error_test.cc: the DDP layer's one error rule (error.h).
//
// Whatever syncline::ddp throws is a syncline::ddp::Error: a c10::Error, so
// a libtorch program's `catch (const c10::Error&)` catches it, carrying the
// absl::StatusCode of what failed. Checked on a real collective failure (a
// peer that exits, met inside backward(), i.e. thrown through the autograd
// engine), on a bad argument, and on ThrowIfError itself.
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

#include <string>

#include "absl/status/status.h"
#include "common/multiprocess.h"
#include "ddp/ddp_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/ddp/distributed.h"
#include "syncline/ddp/error.h"

namespace syncline::ddp::testing {
namespace {

using ::testing::HasSubstr;

TEST(DdpError, ThrowIfErrorKeepsTheCodeAndTheWholeMessage) {
  try {
    ThrowIfError(absl::DeadlineExceededError("allreduce #7 timed out"), "step");
    FAIL() << "nothing thrown";
  } catch (const c10::Error& e) {
    // The message alone: no backtrace appended.
    EXPECT_EQ(std::string(e.what()),
              "syncline::ddp: step: DEADLINE_EXCEEDED: allreduce #7 timed out");
    const auto* error = dynamic_cast<const Error*>(&e);
    ASSERT_NE(error, nullptr);
    EXPECT_EQ(error->code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(error->status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(std::string(error->status().message()), HasSubstr("#7 timed out"));
  }
  EXPECT_EQ(ThrowIfError(absl::StatusOr<int>(3), "value"), 3);
  ThrowIfError(absl::OkStatus(), "nothing");
}

TEST(DdpError, ABadArgumentIsInvalidArgument) {
  try {
    DistributedDataParallel ddp(nullptr, nullptr);
    FAIL() << "a null module was accepted";
  } catch (const c10::Error& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    ASSERT_NE(error, nullptr) << e.what();
    EXPECT_EQ(error->code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("needs a module and a communicator"));
  }
}

// Rank 1 leaves right after construction. Rank 0's first backward posts a
// bucket allreduce that can never complete: the error must come out of
// backward() as a c10::Error whose code names the kind of failure.
TEST(DdpError, APeerThatExitsIsACatchableC10ErrorWithItsCode) {
  auto results = syncline::testing::RunRanks(
      2,
      [](int rank, int) {
        torch::set_num_threads(1);
        std::shared_ptr<Communicator> comm = Connect("gloo", absl::Seconds(5));
        ASSERT_NE(comm, nullptr);
        Mlp model = MakeModel<Mlp>(11);
        DistributedDataParallel ddp(model.ptr(), comm);
        if (rank == 1) return;  // the process exits, its sockets close
        const Batch batch = MlpBatch(4, 0);
        bool caught = false;
        try {
          for (int step = 0; step < 3; ++step) {
            torch::nn::functional::mse_loss(ddp.Forward(model, batch.x), batch.y)
                .backward();
          }
        } catch (const c10::Error& e) {
          caught = true;
          const auto* error = dynamic_cast<const Error*>(&e);
          ASSERT_NE(error, nullptr) << "not a syncline::ddp::Error: " << e.what();
          const absl::StatusCode code = error->code();
          EXPECT_NE(code, absl::StatusCode::kOk);
          EXPECT_NE(code, absl::StatusCode::kUnknown) << e.what();
          EXPECT_NE(code, absl::StatusCode::kInvalidArgument) << e.what();
          // The code is the one the message names.
          EXPECT_THAT(e.what(), HasSubstr(absl::StatusCodeToString(code)));
          EXPECT_THAT(e.what(), HasSubstr("allreduce"));
          std::cerr << "rank 0 caught (" << absl::StatusCodeToString(code)
                    << "): " << e.what() << "\n";
        }
        EXPECT_TRUE(caught) << "training went on without its peer";
      },
      {.timeout = absl::Seconds(60)});
  syncline::testing::ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::ddp::testing
