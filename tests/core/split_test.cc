// split_test.cc: Communicator::Split through a backend's comm_split when it
// has one, through comm_create when it does not, with fake one-rank
// backends (fake_plugins/) that count their entry points.
#include <dlfcn.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/store.h"

namespace syncline {
namespace {

struct FakeCounters {
  int comm_create;
  int comm_split;
  int comm_destroy;
  int last_split_color;
  int last_split_had_store;
  unsigned long long last_split_comm_id;
  unsigned long long last_create_comm_id;
  char last_create_options[256];
};

class SplitTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    const char* saved = std::getenv("SYNCLINE_PLUGIN_PATH");
    saved_ = saved != nullptr ? saved : "";
    ::setenv("SYNCLINE_PLUGIN_PATH", FAKE_PLUGIN_DIR, 1);
    ::unsetenv("SYNCLINE_PLUGINS");
  }
  void TearDown() override { ::setenv("SYNCLINE_PLUGIN_PATH", saved_.c_str(), 1); }

  std::string Backend() const { return GetParam() ? "fakesplit" : "fakenosplit"; }

  std::unique_ptr<Communicator> Create() {
    CommunicatorOptions options;
    options.rank = 0;
    options.world_size = 1;
    options.backend = Backend();
    options.store = MakeHashStore();
    auto comm = Communicator::Create(options);
    EXPECT_TRUE(comm.ok()) << comm.status();
    return comm.ok() ? std::move(comm).value() : nullptr;
  }

  // The loaded plugin's counters (it is loaded by the first Create).
  FakeCounters* Counters() {
    const std::string path =
        std::string(FAKE_PLUGIN_DIR) + "/libsyncline-backend-" + Backend() + ".so";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    EXPECT_NE(handle, nullptr) << path << " is not loaded";
    if (handle == nullptr) return nullptr;
    auto* counters = static_cast<FakeCounters*>(dlsym(handle, "fake_counters"));
    dlclose(handle);  // drops only the reference taken here
    return counters;
  }

  std::string saved_;
};

TEST_P(SplitTest, UsesCommSplitWhenTheBackendHasItAndCommCreateOtherwise) {
  const bool has_split = GetParam();
  auto parent = Create();
  ASSERT_NE(parent, nullptr);
  FakeCounters* n = Counters();
  ASSERT_NE(n, nullptr);
  const FakeCounters before = *n;

  auto child = parent->Split(/*color=*/0, /*key=*/0);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_NE(*child, nullptr);
  EXPECT_EQ(n->comm_split - before.comm_split, has_split ? 1 : 0);
  EXPECT_EQ(n->comm_create - before.comm_create, has_split ? 0 : 1);
  if (has_split) {
    EXPECT_EQ(n->last_split_color, 0);
    EXPECT_EQ(n->last_split_had_store, 1) << "a member gets the child's store";
    EXPECT_NE(n->last_split_comm_id, 0u);
  }
  // The child numbers its own ops from 1 and records them.
  Communicator& c = **child;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.next_seq(), 1u);
  std::vector<double> data = {1, 2, 3};
  auto w = c.Allreduce(View(data));
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Wait(absl::Seconds(5)).ok());
  EXPECT_EQ(c.next_seq(), 2u);
  EXPECT_THAT(c.DumpFlightRecorder(), ::testing::HasSubstr("allreduce"));
  EXPECT_EQ(parent->next_seq(), 1u) << "the split consumed none of the parent's numbers";

  // color < 0: no communicator, but comm_split is still called (it is
  // collective over the parent), without a store.
  auto none = parent->Split(-1, 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ(n->comm_split - before.comm_split, has_split ? 2 : 0);
  EXPECT_EQ(n->comm_create - before.comm_create, has_split ? 0 : 1);
  if (has_split) {
    EXPECT_EQ(n->last_split_color, -1);
    EXPECT_EQ(n->last_split_had_store, 0);
  }

  // Parent first, then the child: each destroyed once, the child still usable.
  const int destroyed = n->comm_destroy;
  parent.reset();
  EXPECT_EQ(n->comm_destroy, destroyed + 1);
  auto again = c.Allreduce(View(data));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->Wait(absl::Seconds(5)).ok());
  again->reset();
  // A Work keeps its plugin communicator alive: the child's goes with the
  // last of them (the first allreduce's), not with the Communicator.
  child->reset();
  EXPECT_EQ(n->comm_destroy, destroyed + 1) << "a Work still holds the child's communicator";
  w->reset();
  EXPECT_EQ(n->comm_destroy, destroyed + 2);
}

// The id the backend was given for the communicator made last.
uint64_t LastChildId(const FakeCounters& n, bool has_split) {
  return has_split ? n.last_split_comm_id : n.last_create_comm_id;
}

TEST_P(SplitTest, ChildIdsNeverCollide) {
  const bool has_split = GetParam();
  auto parent = Create();
  ASSERT_NE(parent, nullptr);
  FakeCounters* n = Counters();
  ASSERT_NE(n, nullptr);
  const uint64_t parent_id = n->last_create_comm_id;
  // The pair that collided under id*1000003 + split*1009 + color.
  auto first = parent->Split(/*color=*/1009, /*key=*/0);
  ASSERT_TRUE(first.ok()) << first.status();
  const uint64_t a = LastChildId(*n, has_split);
  auto second = parent->Split(/*color=*/0, /*key=*/0);
  ASSERT_TRUE(second.ok()) << second.status();
  const uint64_t b = LastChildId(*n, has_split);
  EXPECT_NE(a, b) << "split 1 with color 1009 and split 2 with color 0";
  EXPECT_NE(a, parent_id);
  EXPECT_NE(b, parent_id);
  // Grandchildren and a second root communicator on the same store draw
  // from the same counter.
  std::set<uint64_t> ids = {parent_id, a, b};
  auto grandchild = (*first)->Split(0, 0);
  ASSERT_TRUE(grandchild.ok()) << grandchild.status();
  EXPECT_TRUE(ids.insert(LastChildId(*n, has_split)).second);
  for (int color = 0; color < 50; ++color) {
    auto c = parent->Split(color * 1009, 0);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(ids.insert(LastChildId(*n, has_split)).second) << "color " << color * 1009;
  }
}

// SYNCLINE_<BACKEND>_OPTIONS reaches the plugin after the code's options, so
// that a key set in the environment overrides the same key set in code; a
// child made by Split gets the same options.
TEST_P(SplitTest, BackendOptionsFromTheEnvironmentFollowTheCodes) {
  const std::string variable = GetParam() ? "SYNCLINE_FAKESPLIT_OPTIONS" : "SYNCLINE_FAKENOSPLIT_OPTIONS";
  ::setenv(variable.c_str(), "a=2;c=3", 1);
  CommunicatorOptions options;
  options.rank = 0;
  options.world_size = 1;
  options.backend = Backend();
  options.store = MakeHashStore();
  options.backend_options = "a=1;b=1";
  auto comm = Communicator::Create(options);
  ::unsetenv(variable.c_str());
  ASSERT_TRUE(comm.ok()) << comm.status();
  FakeCounters* n = Counters();
  ASSERT_NE(n, nullptr);
  EXPECT_STREQ(n->last_create_options, "a=1;b=1;a=2;c=3");
  if (!GetParam()) {
    auto child = (*comm)->Split(0, 0);
    ASSERT_TRUE(child.ok()) << child.status();
    EXPECT_STREQ(n->last_create_options, "a=1;b=1;a=2;c=3") << "the child's options";
  }
}

INSTANTIATE_TEST_SUITE_P(Core, SplitTest, ::testing::Bool(), [](const auto& info) {
  return info.param ? std::string("WithCommSplit") : std::string("WithoutCommSplit");
});

// The fake backend built against the frozen copy of the v1 header
// (frozen_abi/), as a third party built it then: today's core loads it, runs
// an op over it and splits it through its comm_split ("Versioning" in
// plugin_abi.h).
TEST(FrozenAbi, APluginBuiltAgainstTheV1HeaderLoadsRunsAndSplits) {
  const char* saved = std::getenv("SYNCLINE_PLUGIN_PATH");
  const std::string restore = saved != nullptr ? saved : "";
  ::setenv("SYNCLINE_PLUGIN_PATH", FAKE_PLUGIN_DIR, 1);
  ::unsetenv("SYNCLINE_PLUGINS");
  CommunicatorOptions options;
  options.rank = 0;
  options.world_size = 1;
  options.backend = "frozenv1";
  options.store = MakeHashStore();
  auto comm = Communicator::Create(options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend_name(), "frozenv1");
  std::vector<float> send = {1, 2, 3};
  std::vector<float> recv(3, 0);
  auto work = (*comm)->Allreduce(View(send), View(recv));
  ASSERT_TRUE(work.ok()) << work.status();
  EXPECT_TRUE((*work)->Wait().ok());
  EXPECT_EQ(recv, send);
  auto child = (*comm)->Split(/*color=*/0, /*key=*/0);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_NE(*child, nullptr);
  ::setenv("SYNCLINE_PLUGIN_PATH", restore.c_str(), 1);
}

}  // namespace
}  // namespace syncline
