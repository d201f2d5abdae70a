// Tests of the plugin SDK's backend table (plugin_table.h): PublishBackend
// makes the table once, from BackendInfo and the backend's classes, with
// the optional entries only when asked for, and every entry reaches the
// backend's C++ method through the adapter.
#include "syncline/plugin_sdk/plugin_table.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncline::backend {
namespace {

// A backend whose ops end at once; it records what the adapter handed it.
class FakeRequest {
 public:
  sl_result_t Test(int* done, sl_error_t* /*err*/) const {
    *done = 1;
    return SL_OK;
  }
  sl_result_t Wait(int64_t /*timeout_ms*/, sl_error_t* /*err*/) const { return SL_OK; }
  sl_result_t StreamWait(void* stream, sl_error_t* /*err*/) {
    stream_ = stream;
    return SL_OK;
  }
  void* stream() const { return stream_; }

 private:
  void* stream_ = nullptr;
};

class FakeCommunicator {
 public:
  explicit FakeCommunicator(int rank) : rank_(rank) {}
  static sl_result_t Create(const sl_comm_config_t& config,
                            std::unique_ptr<FakeCommunicator>* out, sl_error_t* /*err*/) {
    *out = std::make_unique<FakeCommunicator>(config.rank);
    return SL_OK;
  }
  void Abort() {}
  sl_result_t Post(const sl_op_t& /*op*/, std::shared_ptr<FakeRequest>* request,
                   sl_error_t* /*err*/) {
    *request = std::make_shared<FakeRequest>();
    last_ = *request;
    return SL_OK;
  }
  // The child's rank is the key, so that the test sees the arguments arrive.
  sl_result_t Split(int32_t /*color*/, int32_t key, const sl_store_t* /*store*/,
                    uint64_t /*id*/, std::unique_ptr<FakeCommunicator>* child,
                    sl_error_t* /*err*/) {
    *child = std::make_unique<FakeCommunicator>(key);
    return SL_OK;
  }
  int rank() const { return rank_; }
  const std::shared_ptr<FakeRequest>& last() const { return last_; }

 private:
  const int rank_;
  std::shared_ptr<FakeRequest> last_;
};

}  // namespace
}  // namespace syncline::backend

struct sl_request {
  std::shared_ptr<syncline::backend::FakeRequest> request;
};

namespace syncline::backend {
namespace {

using ::testing::HasSubstr;

sl_comm_config_t Config(int rank) {
  sl_comm_config_t config{};
  config.struct_size = sizeof(config);
  config.rank = rank;
  config.size = 4;
  return config;
}

TEST(PluginTable, PublishBackendMakesTheTableOnceWithoutOptionalEntries) {
  static constexpr char kName[] = "fake";
  BackendInfo info{Capabilities::AllOps(SL_DEVICE_CPU, 1u << SL_F32), "fake 1.0"};
  const sl_backend_t* table = PublishBackend<FakeCommunicator, kName>(info);
  EXPECT_EQ(table->abi_version, SL_ABI_VERSION);
  EXPECT_EQ(table->struct_size, sizeof(sl_backend_t));
  EXPECT_STREQ(table->name, "fake");
  EXPECT_STREQ(table->version, "fake 1.0");
  EXPECT_EQ(table->caps->device_mask, 1u << SL_DEVICE_CPU);
  EXPECT_EQ(table->caps->dtype_mask, 1u << SL_F32);
  EXPECT_EQ(table->comm_split, nullptr);
  EXPECT_EQ(table->request_stream_wait, nullptr);
  EXPECT_NE(table->post, nullptr);
  // The entry point may be called again: the same table, made the first time.
  info.version = "another";
  EXPECT_EQ((PublishBackend<FakeCommunicator, kName>(info)), table);
  EXPECT_STREQ(table->version, "fake 1.0");
}

TEST(PluginTable, OptionalEntriesReachTheBackendThroughTheAdapter) {
  static constexpr char kName[] = "fake2";
  using Entries = Adapter<FakeCommunicator, kName>;
  const sl_backend_t* table = PublishBackend<FakeCommunicator, kName>(
      {Capabilities::AllOps(SL_DEVICE_CUDA), "fake2 1.0", &Entries::CommSplit,
       &Entries::RequestStreamWait});
  ASSERT_EQ(table->comm_split, &Entries::CommSplit);
  ASSERT_EQ(table->request_stream_wait, &Entries::RequestStreamWait);

  sl_error_t err{};
  sl_comm_t* comm = nullptr;
  const sl_comm_config_t config = Config(2);
  ASSERT_EQ(table->comm_create(table->ctx, &config, &comm, &err), SL_OK) << err.message;
  EXPECT_EQ(reinterpret_cast<FakeCommunicator*>(comm)->rank(), 2);

  sl_comm_t* child = nullptr;
  ASSERT_EQ(table->comm_split(comm, 0, 3, nullptr, 7, &child, &err), SL_OK) << err.message;
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(reinterpret_cast<FakeCommunicator*>(child)->rank(), 3);

  const sl_op_t op = sl_op_init(SL_OP_BARRIER);
  sl_request_t* request = nullptr;
  ASSERT_EQ(table->post(comm, &op, &request, &err), SL_OK) << err.message;
  int stream = 0;
  ASSERT_EQ(table->request_stream_wait(request, &stream, &err), SL_OK) << err.message;
  EXPECT_EQ(reinterpret_cast<FakeCommunicator*>(comm)->last()->stream(), &stream);
  EXPECT_EQ(table->request_stream_wait(nullptr, &stream, &err), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(err.message, HasSubstr("fake2 request_stream_wait: null request"));
  EXPECT_EQ(table->request_wait(nullptr, 0, &err), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(err.message, HasSubstr("fake2 request_wait: null request"));
  EXPECT_EQ(table->request_wait(request, 0, &err), SL_OK) << err.message;

  table->request_free(request);
  table->comm_destroy(child);
  table->comm_destroy(comm);
}

}  // namespace
}  // namespace syncline::backend
