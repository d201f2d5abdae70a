// store_test.cc: the Store contract, for every implementation.
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/store.h"
#include "syncline/tcp_store.h"

namespace syncline {
namespace {

// Holds whatever keeps a store alive (a server, a temp file).
struct StoreFixture {
  std::unique_ptr<TcpStoreServer> server;
  std::string file;
  std::shared_ptr<Store> store;
  std::function<std::shared_ptr<Store>()> another_client;
};

StoreFixture MakeStore(const std::string& kind) {
  StoreFixture f;
  if (kind == "hash") {
    f.store = MakeHashStore();
    f.another_client = [s = f.store] { return s; };
  } else if (kind == "file") {
    char tmpl[] = "/tmp/syncline-filestore-XXXXXX";
    int fd = ::mkstemp(tmpl);
    ::close(fd);
    f.file = tmpl;
    f.store = *MakeFileStore(f.file);
    f.another_client = [path = f.file] { return *MakeFileStore(path); };
  } else if (kind == "prefix") {
    auto base = MakeHashStore();
    f.store = MakePrefixStore("group1", base);
    f.another_client = [base] { return MakePrefixStore("group1", base); };
  } else {
    f.server = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
    int port = f.server->port();
    auto connect = [port] {
      return *ConnectTcpStore({.host = "127.0.0.1", .port = port,
                               .connect_timeout = absl::Seconds(5)});
    };
    f.store = connect();
    f.another_client = connect;
  }
  return f;
}

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { f_ = MakeStore(GetParam()); }
  void TearDown() override {
    if (!f_.file.empty()) ::unlink(f_.file.c_str());
  }
  StoreFixture f_;
};

TEST_P(StoreTest, SetGetOverwrite) {
  Store& s = *f_.store;
  ASSERT_TRUE(s.Set("a", "1").ok());
  EXPECT_EQ(*s.Get("a", absl::Seconds(1)), "1");
  ASSERT_TRUE(s.Set("a", std::string("\0x\xff", 3)).ok());
  EXPECT_EQ(*s.Get("a", absl::Seconds(1)), std::string("\0x\xff", 3));
  ASSERT_TRUE(s.Set("empty", "").ok());
  EXPECT_EQ(*s.Get("empty", absl::Seconds(1)), "");
}

TEST_P(StoreTest, AddCountsAcrossClients) {
  auto other = f_.another_client();
  EXPECT_EQ(*f_.store->Add("n", 5), 5);
  EXPECT_EQ(*other->Add("n", -2), 3);
  EXPECT_EQ(*f_.store->Add("n", 0), 3);
  ASSERT_TRUE(f_.store->Set("text", "abc").ok());
  EXPECT_FALSE(f_.store->Add("text", 1).ok());
}

TEST_P(StoreTest, WaitTimesOutNamingMissingKeys) {
  ASSERT_TRUE(f_.store->Set("present", "x").ok());
  absl::Time start = absl::Now();
  absl::Status st = f_.store->Wait({"present", "absent1", "absent2"}, absl::Milliseconds(300));
  absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("absent1"));
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("absent2"));
  EXPECT_THAT(std::string(st.message()), ::testing::Not(::testing::HasSubstr("present,")));
  EXPECT_GE(took, absl::Milliseconds(290));
  EXPECT_LT(took, absl::Seconds(3));
  auto got = f_.store->Get("absent1", absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
}

TEST_P(StoreTest, GetWaitsForAnotherClientsSet) {
  auto other = f_.another_client();
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    ASSERT_TRUE(other->Set("late", "value").ok());
  });
  auto v = f_.store->Get("late", absl::Seconds(5));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "value");
}

TEST_P(StoreTest, CompareSetDeleteCheckNumKeys) {
  Store& s = *f_.store;
  EXPECT_EQ(*s.CompareSet("k", "", "first"), "first");    // absent + empty expected
  EXPECT_EQ(*s.CompareSet("k", "wrong", "second"), "first");
  EXPECT_EQ(*s.CompareSet("k", "first", "third"), "third");
  auto present = *s.Check({"k", "nope"});
  EXPECT_EQ(present, (std::vector<bool>{true, false}));
  int64_t before = *s.NumKeys();
  EXPECT_TRUE(*s.Delete("k"));
  EXPECT_FALSE(*s.Delete("k"));
  EXPECT_EQ(*s.NumKeys(), before - 1);
}

TEST_P(StoreTest, LargeValueRoundTrips) {
  std::string big(8 << 20, 'z');
  big[12345] = 'q';
  ASSERT_TRUE(f_.store->Set("big", big).ok());
  EXPECT_EQ(*f_.store->Get("big", absl::Seconds(5)), big);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreTest,
                         ::testing::Values("hash", "file", "prefix", "tcp"),
                         [](const auto& info) { return info.param; });

TEST(PrefixStore, ScopesKeys) {
  auto base = MakeHashStore();
  auto a = MakePrefixStore("a", base);
  auto b = MakePrefixStore("b", base);
  ASSERT_TRUE(a->Set("k", "1").ok());
  ASSERT_TRUE(b->Set("k", "2").ok());
  EXPECT_EQ(*a->Get("k", absl::Seconds(1)), "1");
  EXPECT_EQ(*b->Get("k", absl::Seconds(1)), "2");
  EXPECT_EQ(*base->Get("a/k", absl::Seconds(1)), "1");
}

}  // namespace
}  // namespace syncline
