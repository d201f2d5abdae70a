// The NCCL backend's abort propagation through the store (abort_record.h),
// without a GPU: the code that publishes and polls abort records touches
// neither CUDA nor NCCL, so it runs here for real, on separate processes
// that share the core's TCP store, exactly as ranks do.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/nccl/abort_record.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/store.h"
#include "syncline/tcp_store.h"

namespace syncline::nccl_backend {
namespace {

using ::syncline::testing::ExpectAllSucceeded;
using ::syncline::testing::RunRanks;
using ::testing::HasSubstr;

// StoreTable: a syncline::Store seen through the C ABI, as the core hands it
// to a backend (core/src/store_adapter.cc does the same inside libsyncline).
class StoreTable {
 public:
  explicit StoreTable(std::shared_ptr<Store> store) : store_(std::move(store)) {}
  sl_store_t table() { return sl_store_t{sizeof(sl_store_t), this, &Set, &Get, &Free, &Add}; }
  Store& store() { return *store_; }
  // Store calls made through the table so far.
  int calls() const { return calls_; }

 private:
  static StoreTable* Self(void* ctx) { return static_cast<StoreTable*>(ctx); }
  static sl_result_t Fail(const absl::Status& status, sl_error_t* err) {
    std::snprintf(err->message, sizeof(err->message), "%s",
                  std::string(status.message()).c_str());
    return absl::IsDeadlineExceeded(status) ? SL_ERR_TIMEOUT : SL_ERR_PEER;
  }
  static sl_result_t Set(void* ctx, const char* key, const void* value, size_t len,
                         sl_error_t* err) {
    ++Self(ctx)->calls_;
    absl::Status s = Self(ctx)->store_->Set(
        key, absl::string_view(static_cast<const char*>(value), len));
    return s.ok() ? SL_OK : Fail(s, err);
  }
  static sl_result_t Get(void* ctx, const char* key, int64_t timeout_ms, void** value,
                         size_t* len, sl_error_t* err) {
    ++Self(ctx)->calls_;
    auto v = Self(ctx)->store_->Get(key, timeout_ms < 0 ? absl::InfiniteDuration()
                                                        : absl::Milliseconds(timeout_ms));
    if (!v.ok()) return Fail(v.status(), err);
    *len = v->size();
    *value = std::malloc(v->size() + 1);
    std::memcpy(*value, v->data(), v->size());
    return SL_OK;
  }
  static void Free(void*, void* value) { std::free(value); }
  static sl_result_t Add(void* ctx, const char* key, int64_t delta, int64_t* result,
                         sl_error_t* err) {
    ++Self(ctx)->calls_;
    auto v = Self(ctx)->store_->Add(key, delta);
    if (!v.ok()) return Fail(v.status(), err);
    *result = *v;
    return SL_OK;
  }

  std::shared_ptr<Store> store_;
  std::atomic<int> calls_{0};
};

// In a rank: the job's TCP store (hosted by the test's parent process),
// scoped to `prefix` as the core scopes a communicator's keys.
std::unique_ptr<StoreTable> ConnectRankStore(const std::string& prefix) {
  TcpStoreClientOptions options;
  options.host = "127.0.0.1";
  options.port = std::atoi(std::getenv("MASTER_PORT"));
  auto store = ConnectTcpStore(options);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return nullptr;
  return std::make_unique<StoreTable>(MakePrefixStore(prefix, *store));
}

// Blocks until every rank has reached `name` (a store barrier), for at most
// 20 s, so that a rank whose assertion failed early fails the others fast.
void Barrier(Store& store, const std::string& name, int size) {
  ASSERT_TRUE(store.Add("barrier/" + name, 1).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (;;) {
    auto count = store.Add("barrier/" + name, 0);
    ASSERT_TRUE(count.ok()) << count.status();
    if (*count >= size) return;
    ASSERT_LT(absl::Now(), deadline) << "barrier '" << name << "': a rank never came";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Collects what a Watch() callback saw.
struct Seen {
  std::mutex mu;
  std::vector<AbortRecord> records;
  absl::Time when;
  void Add(const AbortRecord& record) {
    std::lock_guard<std::mutex> lock(mu);
    records.push_back(record);
    when = absl::Now();
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return records.size();
  }
};

bool WaitFor(Seen& seen, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (seen.count() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  return seen.count() > 0;
}

TEST(AbortRecord, EncodesAndDecodesEveryField) {
  AbortRecord record;
  record.rank = 3;
  record.op = "allreduce";
  record.seq = 17;
  record.reason = "allreduce #17 (f32 x 1024, sum) timed out after 30.0 s\nsecond line";
  AbortRecord decoded;
  ASSERT_TRUE(AbortRecord::Decode(record.Encode(), &decoded)) << record.Encode();
  EXPECT_EQ(decoded.rank, 3);
  EXPECT_EQ(decoded.op, "allreduce");
  EXPECT_EQ(decoded.seq, 17u);
  EXPECT_EQ(decoded.reason, record.reason);
  EXPECT_EQ(decoded.Describe(),
            "rank 3 aborted first, at allreduce #17: " + record.reason);

  AbortRecord no_op;
  no_op.rank = 0;
  no_op.reason = "NCCL reported an asynchronous error";
  ASSERT_TRUE(AbortRecord::Decode(no_op.Encode(), &decoded));
  EXPECT_EQ(decoded.op, "");
  EXPECT_EQ(decoded.Describe(), "rank 0 aborted first: NCCL reported an asynchronous error");
}

TEST(AbortRecord, RefusesTextItDidNotWrite) {
  AbortRecord decoded;
  for (const char* text : {"", "v1", "v1 2 allreduce", "v2 2 allreduce 5 why",
                           "v1 x allreduce 5 why", "v1 2 allreduce 5x why"}) {
    EXPECT_FALSE(AbortRecord::Decode(text, &decoded)) << "'" << text << "'";
  }
}

TEST(AbortChannel, EveryRankLearnsWhoAbortedFirstAndWhy) {
  // Rank 1 aborts at op #7; ranks 0 and 2 only watch, as a rank does that
  // is not exchanging data with it.
  auto results = RunRanks(3, [](int rank, int size) {
    auto store = ConnectRankStore("comm5");
    ASSERT_NE(store, nullptr);
    sl_store_t table = store->table();
    AbortChannelOptions options;
    options.poll_period = std::chrono::milliseconds(50);
    AbortChannel channel(&table, rank, options);
    Seen seen;
    channel.Watch([&](const AbortRecord& first) { seen.Add(first); });
    Barrier(store->store(), "watching", size);
    if (rank == 1) {
      AbortRecord mine{1, "allreduce", 7, "allreduce #7 timed out after 2.0 s"};
      AbortRecord first;
      std::string error;
      const absl::Time published = absl::Now();
      ASSERT_TRUE(channel.Publish(mine, &first, &error)) << error;
      EXPECT_EQ(first.rank, 1);
      ASSERT_TRUE(store->store().Set("published_at", absl::StrCat(absl::ToUnixMillis(published))).ok());
      // The publisher does not call back into itself: it is already aborting.
      absl::SleepFor(absl::Milliseconds(300));
      EXPECT_EQ(seen.count(), 0u);
    } else {
      ASSERT_TRUE(WaitFor(seen, absl::Seconds(10))) << "rank " << rank << " never heard";
      std::lock_guard<std::mutex> lock(seen.mu);
      ASSERT_EQ(seen.records.size(), 1u);  // once
      EXPECT_EQ(seen.records[0].rank, 1);
      EXPECT_EQ(seen.records[0].op, "allreduce");
      EXPECT_EQ(seen.records[0].seq, 7u);
      EXPECT_EQ(seen.records[0].Describe(),
                "rank 1 aborted first, at allreduce #7: allreduce #7 timed out after 2.0 s");
      auto published = store->store().Get("published_at", absl::Seconds(10));
      ASSERT_TRUE(published.ok()) << published.status();
      // Within a few poll periods of the publication, not at some deadline.
      const int64_t lag_ms = absl::ToUnixMillis(seen.when) - std::atoll(published->c_str());
      EXPECT_LT(lag_ms, 2000) << "heard " << lag_ms << " ms after the publication";
    }
    channel.Stop();
    Barrier(store->store(), "done", size);
  });
  ExpectAllSucceeded(results);
}

TEST(AbortChannel, ConcurrentAbortsAgreeOnOneFirstRecord) {
  // Every rank fails at once (a common picture when a peer dies): exactly
  // one record is written, and every rank names the same first rank.
  auto results = RunRanks(4, [](int rank, int size) {
    auto store = ConnectRankStore("comm9");
    ASSERT_NE(store, nullptr);
    sl_store_t table = store->table();
    AbortChannel channel(&table, rank, {});
    Barrier(store->store(), "start", size);
    AbortRecord first;
    std::string error;
    ASSERT_TRUE(channel.Publish({rank, "broadcast", 3, "rank " + std::to_string(rank) + " broke"},
                                &first, &error))
        << error;
    ASSERT_GE(first.rank, 0);
    EXPECT_EQ(first.reason, "rank " + std::to_string(first.rank) + " broke");
    ASSERT_TRUE(store->store().Set("first/" + std::to_string(rank),
                                   std::to_string(first.rank)).ok());
    Barrier(store->store(), "published", size);
    for (int r = 0; r < size; ++r) {
      auto other = store->store().Get("first/" + std::to_string(r), absl::Seconds(10));
      ASSERT_TRUE(other.ok()) << other.status();
      EXPECT_EQ(*other, std::to_string(first.rank)) << "rank " << r << " disagrees";
    }
    auto count = store->store().Add("nccl/abort/count", 0);
    ASSERT_TRUE(count.ok());
    EXPECT_EQ(*count, size);
  });
  ExpectAllSucceeded(results);
}

TEST(AbortChannel, CleanShutdownPublishesNothingAndStopsPromptly) {
  auto results = RunRanks(2, [](int rank, int size) {
    auto store = ConnectRankStore("comm2");
    ASSERT_NE(store, nullptr);
    sl_store_t table = store->table();
    Seen seen;
    {
      AbortChannelOptions options;
      options.poll_period = std::chrono::milliseconds(20);
      AbortChannel channel(&table, rank, options);
      channel.Watch([&](const AbortRecord& first) { seen.Add(first); });
      absl::SleepFor(absl::Milliseconds(300));
      const absl::Time stop = absl::Now();
      channel.Stop();
      EXPECT_LT(absl::Now() - stop, absl::Milliseconds(500));
      // It polled (cheaply) while it ran...
      EXPECT_GE(store->calls(), 3);
    }
    // ...and after Stop() (or destruction) it touches the store no more.
    const int calls = store->calls();
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ(store->calls(), calls);
    EXPECT_EQ(seen.count(), 0u);
    Barrier(store->store(), "stopped", size);
    const std::vector<std::string> keys = {"nccl/abort/record"};
    auto exists = store->store().Check(keys);
    ASSERT_TRUE(exists.ok()) << exists.status();
    EXPECT_FALSE((*exists)[0]) << "a clean shutdown wrote an abort record";
    auto count = store->store().Add("nccl/abort/count", 0);
    ASSERT_TRUE(count.ok());
    EXPECT_EQ(*count, 0);
  });
  ExpectAllSucceeded(results);
}

TEST(AbortChannel, APublisherThatDiedBeforeItsRecordStillCounts) {
  // The first rank took the count and died before writing its record: the
  // others still abort, saying that the record is missing.
  auto store = std::make_unique<StoreTable>(MakeHashStore());
  sl_store_t table = store->table();
  ASSERT_TRUE(store->store().Add("nccl/abort/count", 1).ok());
  AbortChannelOptions options;
  options.record_timeout = std::chrono::milliseconds(100);
  AbortChannel channel(&table, 0, options);
  AbortRecord first;
  std::string error;
  ASSERT_TRUE(channel.Poll(&first, &error)) << error;
  EXPECT_EQ(first.rank, -1);
  EXPECT_THAT(first.Describe(), HasSubstr("a rank aborted first"));
  EXPECT_THAT(first.Describe(), HasSubstr("did not write its record"));
}

TEST(AbortChannel, MalformedRecordIsNamed) {
  auto store = std::make_unique<StoreTable>(MakeHashStore());
  sl_store_t table = store->table();
  ASSERT_TRUE(store->store().Add("nccl/abort/count", 1).ok());
  ASSERT_TRUE(store->store().Set("nccl/abort/record", "garbage").ok());
  AbortChannel channel(&table, 0, {});
  AbortRecord first;
  std::string error;
  ASSERT_TRUE(channel.Poll(&first, &error));
  EXPECT_THAT(first.reason, HasSubstr("malformed ('garbage')"));
}

}  // namespace
}  // namespace syncline::nccl_backend
