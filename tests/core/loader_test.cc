// loader_test.cc: every loader failure gives a message that says why.
#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline {
namespace {

absl::Status CreateWith(const std::string& backend) {
  CommunicatorOptions options;
  options.backend = backend;
  options.rank = 0;
  options.world_size = 1;
  return Communicator::Create(options).status();
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("SYNCLINE_PLUGIN_PATH");
    saved_ = path ? path : "";
    ::setenv("SYNCLINE_PLUGIN_PATH", BAD_PLUGIN_DIR, 1);
  }
  void TearDown() override { ::setenv("SYNCLINE_PLUGIN_PATH", saved_.c_str(), 1); }
  std::string saved_;
};

TEST_F(LoaderTest, UnknownBackendListsPathsAndAvailableBackends) {
  absl::Status s = CreateWith("nosuch");
  ASSERT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("cannot load backend 'nosuch'"));
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr(std::string(BAD_PLUGIN_DIR) +
                                   "/libsyncline-backend-nosuch.so: not found"));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("Available backends:"));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("Search path: "));
}

TEST_F(LoaderTest, LibraryWithoutEntryPointIsNotAPlugin) {
  absl::Status s = CreateWith("notaplugin");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("not a Syncline backend (it does not export "
                                   "syncline_backend_plugin_v1)"));
}

TEST_F(LoaderTest, OtherAbiVersionIsRefused) {
  absl::Status s = CreateWith("wrongabi");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("built for Syncline plugin ABI version 99"));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("rebuild the plugin"));
}

TEST_F(LoaderTest, MissingDependencyIsNamed) {
  absl::Status s = CreateWith("missingdep");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("missing dependency libsyncline_test_dep.so"));
}

TEST_F(LoaderTest, BadBackendMapIsExplained) {
  absl::Status s = CreateWith("gpu:nccl");
  ASSERT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("unknown device 'gpu'"));
  s = CreateWith("cuda:nccl");
  ASSERT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("names no backend for cpu"));
}

TEST_F(LoaderTest, MissingInterposerIsNamed) {
  ::setenv("SYNCLINE_PLUGIN_PATH", saved_.c_str(), 1);
  CommunicatorOptions options;
  options.backend = "gloo";
  options.plugins = {"nosuchplugin"};
  options.rank = 0;
  options.world_size = 1;
  absl::Status s = Communicator::Create(options).status();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("cannot load interposer 'nosuchplugin'"));
}

}  // namespace
}  // namespace syncline
