// ucx_options_test.cc: the ucx backend's options set from the environment
// (SYNCLINE_UCX_OPTIONS) take effect, and a bad one fails Create with a
// message that names the variable and lists the known keys.
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/store.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<Communicator>> CreateAlone(const char* env_options) {
  ::setenv("SYNCLINE_UCX_OPTIONS", env_options, 1);
  CommunicatorOptions options;
  options.rank = 0;
  options.world_size = 1;
  options.backend = "ucx";
  options.store = MakeHashStore();
  options.backend_options = "chunk_bytes=1m";
  auto comm = Communicator::Create(options);
  ::unsetenv("SYNCLINE_UCX_OPTIONS");
  return comm;
}

TEST(UcxOptionsFromTheEnvironment, ABadKeyNamesTheVariableAndTheKnownKeys) {
  auto comm = CreateAlone("frobnicate=1");
  ASSERT_FALSE(comm.ok());
  const std::string m(comm.status().message());
  EXPECT_THAT(m, HasSubstr("unknown option 'frobnicate'"));
  EXPECT_THAT(m, HasSubstr("busy_poll_us"));
  EXPECT_THAT(m, HasSubstr("'chunk_bytes=1m;frobnicate=1'"));
  EXPECT_THAT(m, HasSubstr("SYNCLINE_UCX_OPTIONS"));
}

TEST(UcxOptionsFromTheEnvironment, ABadValueOverridingTheCodesIsRefused) {
  // The environment's chunk_bytes comes last and wins, so its bad value is
  // what the backend refuses (the code's 1m alone is fine).
  auto comm = CreateAlone("chunk_bytes=8");
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("chunk_bytes must be at least 64"));
}

TEST(UcxOptionsFromTheEnvironment, ValidOptionsAreUsed) {
  auto comm = CreateAlone("busy_poll_us=0;allreduce_small_max=0;chunk_bytes=64k");
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<float> data = {1.5f, -2.0f, 3.25f};
  auto work = (*comm)->Allreduce(View(data));
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_TRUE((*work)->Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

}  // namespace
}  // namespace syncline
