// loader_test.cc: every loader failure gives a message that says why.
#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/plugin_abi.h"
#include "syncline/status.h"

namespace syncline {
namespace {

// A one-rank communicator over `backend`, wrapped in `plugins`.
absl::StatusOr<std::unique_ptr<Communicator>> OneRank(const std::string& backend,
                                                     std::vector<std::string> plugins = {}) {
  CommunicatorOptions options;
  options.backend = backend;
  options.plugins = std::move(plugins);
  options.rank = 0;
  options.world_size = 1;
  return Communicator::Create(options);
}

absl::Status CreateWith(const std::string& backend) { return OneRank(backend).status(); }

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

// Files that are there but do not load are not offered as choices: they are
// listed apart, each with its reason.
TEST_F(LoaderTest, AvailableBackendsAreOnlyThoseThatLoad) {
  absl::Status s = CreateWith("nosuch");
  ASSERT_TRUE(absl::IsNotFound(s)) << s;
  const std::string m(s.message());
  const size_t available = m.find("Available backends:");
  const size_t broken = m.find("Found but cannot be loaded:");
  const size_t search = m.find("Search path:");
  ASSERT_NE(available, std::string::npos) << m;
  ASSERT_NE(broken, std::string::npos) << m;
  ASSERT_LT(available, broken) << m;
  ASSERT_LT(broken, search) << m;
  const std::string loadable = m.substr(available, broken - available);
  const std::string failing = m.substr(broken, search - broken);
  for (const char* bad : {"notaplugin", "wrongabi", "missingdep"}) {
    EXPECT_THAT(loadable, ::testing::Not(::testing::HasSubstr(bad))) << m;
  }
  EXPECT_THAT(failing, ::testing::HasSubstr("notaplugin: "));
  EXPECT_THAT(failing, ::testing::HasSubstr("does not export syncline_backend_plugin_v2 or "
                                            "syncline_backend_plugin_v1"));
  EXPECT_THAT(failing, ::testing::HasSubstr("wrongabi: "));
  EXPECT_THAT(failing, ::testing::HasSubstr("ABI version 99"));
  EXPECT_THAT(failing, ::testing::HasSubstr("missingdep: "));
  EXPECT_THAT(failing, ::testing::HasSubstr("missing dependency libsyncline_test_dep.so"));
  EXPECT_THAT(loadable, ::testing::HasSubstr("gloo")) << "the build's own backend loads";
}

TEST_F(LoaderTest, LibraryWithoutEntryPointIsNotAPlugin) {
  absl::Status s = CreateWith("notaplugin");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("not a Syncline backend (it does not export "
                                   "syncline_backend_plugin_v2 or syncline_backend_plugin_v1)"));
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

// The counters of bad_plugins/abi_compat.cc, read from the copy the loader
// opened (RTLD_NOLOAD: no second copy).
int PluginCounter(const std::string& backend, const char* counter) {
  const std::string path =
      std::string(BAD_PLUGIN_DIR) + "/libsyncline-backend-" + backend + ".so";
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  auto fn = reinterpret_cast<int (*)()>(::dlsym(handle, counter));
  const int value = fn != nullptr ? fn() : -2;
  ::dlclose(handle);
  return value;
}

// Posts a one-rank allreduce on `backend` (wrapped in `plugins`) and calls
// Work::WaitStream on it; returns how the backend was waited on as
// {request_wait calls, request_stream_wait calls} during that call.
std::pair<int, int> WaitStreamOn(const std::string& backend,
                                 std::vector<std::string> plugins = {}) {
  auto comm = OneRank(backend, std::move(plugins));
  EXPECT_TRUE(comm.ok()) << comm.status();
  if (!comm.ok()) return {-1, -1};
  std::vector<float> data = {1.5f, -2.0f};
  auto work = (*comm)->Allreduce(View(data));
  EXPECT_TRUE(work.ok()) << work.status();
  if (!work.ok()) return {-1, -1};
  const int waits = PluginCounter(backend, "syncline_test_waits");
  const int stream_waits = PluginCounter(backend, "syncline_test_stream_waits");
  const absl::Status status = (*work)->WaitStream(/*stream=*/nullptr);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
  return {PluginCounter(backend, "syncline_test_waits") - waits,
          PluginCounter(backend, "syncline_test_stream_waits") - stream_waits};
}

// The version policy of plugin_abi.h, over bad_plugins/abi_compat.cc.
TEST_F(LoaderTest, V1PluginLoadsThroughTheShimWithoutTheEntriesV1AppendedLater) {
  // Built against the frozen v1 header; its request_stream_wait lies past
  // struct_size and holds an entry that aborts the process: WaitStream
  // must host-wait instead.
  EXPECT_EQ(WaitStreamOn("oldabi"), std::make_pair(1, 0));
}

TEST_F(LoaderTest, CurrentTableGetsItsStreamWaitCalled) {
  EXPECT_EQ(WaitStreamOn("newabi"), std::make_pair(0, 1));
}

// Posts a one-rank f32 allreduce with `op` on `backend` (wrapped in
// `plugins`) and checks its result.
absl::Status AllreduceOn(const std::string& backend, ReduceOp op,
                         std::vector<std::string> plugins = {}) {
  auto comm = OneRank(backend, std::move(plugins));
  if (!comm.ok()) return comm.status();
  std::vector<float> data = {1.5f, -2.0f};
  std::vector<float> out(2, 0.0f);
  AllreduceOptions reduce;
  reduce.op = op;
  auto work = (*comm)->Allreduce(View(data), View(out), reduce);
  if (!work.ok()) return work.status();
  SL_RETURN_IF_ERROR((*work)->Wait());
  if (out != data) return absl::InternalError("wrong result");
  return absl::OkStatus();
}

TEST_F(LoaderTest, ShorterTableAndCapabilitiesLoadWithWhatTheyLackAbsent) {
  // Cut after the required entries (a poisoned request_stream_wait beyond),
  // capabilities of the minimum size listing one reduce op (sum).
  EXPECT_EQ(WaitStreamOn("shorttable"), std::make_pair(1, 0));
  EXPECT_TRUE(AllreduceOn("shorttable", ReduceOp::kSum).ok());
  const absl::Status max = AllreduceOn("shorttable", ReduceOp::kMax);
  EXPECT_TRUE(absl::IsUnimplemented(max)) << max;
  EXPECT_THAT(std::string(max.message()), ::testing::HasSubstr("cannot reduce f32 with max"));
}

TEST_F(LoaderTest, GrownTableFromANewerHeaderLoadsAndWorks) {
  // A field this loader does not know after the table (poisoned), longer
  // capabilities, and two reduce ops past SL_REDOP_COUNT.
  EXPECT_EQ(WaitStreamOn("growntable"), std::make_pair(0, 1));
  EXPECT_TRUE(AllreduceOn("growntable", ReduceOp::kMax).ok());
  const absl::Status prod = AllreduceOn("growntable", ReduceOp::kProd);
  EXPECT_TRUE(absl::IsUnimplemented(prod)) << prod;
}

TEST_F(LoaderTest, TableWithABadSizeIsRefused) {
  absl::Status s = CreateWith("badsize");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr(absl::StrCat(
                  "libsyncline-backend-badsize.so: plugin table is ",
                  offsetof(sl_backend_t, post), " bytes, expected at least ", SL_BACKEND_V2_MIN_SIZE)));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("rebuild the plugin"));
}

#if SYNCLINE_TEST_INTERPOSERS
// Each wrapped table carries its layer's state in ctx: the same interposer
// stacks any number of times (the SDK used to stop at 8 fixed slots), and
// every layer forwards to its own next layer.
TEST_F(LoaderTest, TheSameInterposerStacksTwelveTimes) {
  ::unsetenv("SYNCLINE_FAULT");
  const std::vector<std::string> twelve(12, "faults");
  const absl::Status sum = AllreduceOn("newabi", ReduceOp::kSum, twelve);
  EXPECT_TRUE(sum.ok()) << sum;
  EXPECT_EQ(WaitStreamOn("newabi", twelve), std::make_pair(0, 1));
  // Over the v1 shim and a short table too, each with its own twelve layers.
  EXPECT_EQ(WaitStreamOn("oldabi", twelve), std::make_pair(1, 0));
  EXPECT_EQ(WaitStreamOn("shorttable", twelve), std::make_pair(1, 0));
}

TEST_F(LoaderTest, InterposersPassStreamWaitThroughOrLeaveItAbsent) {
  // Interposers are found next to libsyncline, after BAD_PLUGIN_DIR.
  ::unsetenv("SYNCLINE_FAULT");
  EXPECT_EQ(WaitStreamOn("newabi", {"faults"}), std::make_pair(0, 1));
  // check compares each op across ranks with collectives of its own on the
  // backend (which it host-waits), so count only the stream waits.
  EXPECT_EQ(WaitStreamOn("newabi", {"check", "faults"}).second, 1);
  // Over a backend without it, the wrapped table has none either, so the
  // core host-waits through the interposer's request_wait.
  EXPECT_EQ(WaitStreamOn("oldabi", {"faults"}), std::make_pair(1, 0));
}
#endif
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
