// Tests of the NCCL plugin that need no GPU, so they run in CI: the plugin
// loads and reports honest capabilities, a missing NCCL library is named at
// load time, creating a communicator without a GPU fails at once with the
// reason and a hint, and `auto` picks the CPU backend for CPU buffers.
// On a machine with a GPU, the no-device cases skip and say why.
#include <nccl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/nccl/nccl_test_util.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kNoDevice[] = "no CUDA device is visible (cudaGetDeviceCount=";
constexpr char kCpuHint[] = "use SYNCLINE_BACKEND=gloo or ucx on CPU";

// Skips the calling test when a GPU is visible: the no-device path cannot
// be reached there (the GPU suite covers that machine).
#define SKIP_IF_GPU()                                                           \
  do {                                                                          \
    std::string why;                                                            \
    if (CudaDevices(&why) > 0) GTEST_SKIP() << "a CUDA device is visible here"; \
  } while (0)

absl::StatusOr<std::unique_ptr<Communicator>> Create(const std::string& backend,
                                                     Device device) {
  CommunicatorOptions options;
  options.backend = backend;
  options.device = device;
  options.timeout = absl::Seconds(60);
  return Communicator::Create(options);
}

TEST(NcclPlugin, LoadsAndReportsCapabilities) {
  std::string why;
  const sl_backend_t* table = LoadNcclTable(&why);
  ASSERT_NE(table, nullptr) << why;
  EXPECT_EQ(table->abi_version, SL_ABI_VERSION);
  EXPECT_GE(table->struct_size, sizeof(sl_backend_t));
  EXPECT_STREQ(table->name, "nccl");
  EXPECT_THAT(table->version, AllOf(HasSubstr("NCCL 2."), HasSubstr("CUDA runtime")));
  // CUDA buffers only; every op; all eight dtypes, bf16 included, for data
  // movement and for every reduction.
  EXPECT_EQ(table->caps->device_mask, 1u << SL_DEVICE_CUDA);
  EXPECT_EQ(table->caps->op_mask, (1u << SL_OP_KIND_COUNT) - 1);
  EXPECT_EQ(table->caps->dtype_mask, (1u << SL_DTYPE_COUNT) - 1);
  for (int op = 0; op < SL_REDOP_COUNT; ++op) {
    EXPECT_TRUE(table->caps->reduce_dtype_mask[op] & (1u << SL_BF16)) << "redop " << op;
    EXPECT_EQ(table->caps->reduce_dtype_mask[op], (1u << SL_DTYPE_COUNT) - 1);
  }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  EXPECT_NE(table->comm_split, nullptr) << "ncclCommSplit is available";
#else
  EXPECT_EQ(table->comm_split, nullptr) << "the core splits with comm_create";
#endif
  // The optional device-side wait (Work::WaitStream).
  EXPECT_NE(table->request_stream_wait, nullptr);
  for (auto* fn :
       {reinterpret_cast<void*>(table->comm_create),
        reinterpret_cast<void*>(table->comm_destroy),
        reinterpret_cast<void*>(table->comm_abort), reinterpret_cast<void*>(table->post),
        reinterpret_cast<void*>(table->request_test),
        reinterpret_cast<void*>(table->request_wait),
        reinterpret_cast<void*>(table->request_free)}) {
    EXPECT_NE(fn, nullptr);
  }
}

TEST(NcclPlugin, NoDeviceFailsAtOnceWithTheReason) {
  SKIP_IF_GPU();
  const absl::Time start = absl::Now();
  auto comm = Create("nccl", Device::Cuda(0));
  ASSERT_FALSE(comm.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "must not wait for the timeout";
  // SL_ERR_UNAVAILABLE (a missing resource), not a dead peer (kUnavailable).
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kResourceExhausted) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()),
              AllOf(HasSubstr("nccl"), HasSubstr(kNoDevice), HasSubstr(kCpuHint)));
}

TEST(NcclPlugin, NoDeviceFailsAtOnceOnEveryRank) {
  SKIP_IF_GPU();
  RunOptions options;
  options.timeout = absl::Seconds(60);
  auto results = RunRanks(
      3,
      [](int, int) {
        const absl::Time start = absl::Now();
        auto comm = Create("nccl", Device::Cuda(0));
        ASSERT_FALSE(comm.ok());
        EXPECT_LT(absl::Now() - start, absl::Seconds(20));
        EXPECT_THAT(std::string(comm.status().message()), HasSubstr(kNoDevice));
      },
      options);
  ExpectAllSucceeded(results);
}

TEST(NcclPlugin, CpuCommunicatorIsRefusedWithAHint) {
  auto comm = Create("nccl", Device::Cpu());
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kUnimplemented) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()),
              AllOf(HasSubstr("CUDA buffers only"), HasSubstr("SYNCLINE_BACKEND=gloo")));
}

TEST(NcclPlugin, AutoPicksGlooForCpuBuffers) {
  auto comm = Create("auto", Device::Cpu());
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend_name(), "gloo");
  std::vector<float> x = {1.5f, -2.0f};
  auto work = (*comm)->Allreduce(View(x));
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_TRUE((*work)->Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
}

TEST(NcclPlugin, AutoPicksNcclForCudaBuffers) {
  SKIP_IF_GPU();
  auto comm = Create("auto", Device::Cuda(0));
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(std::string(comm.status().message()),
              AllOf(HasSubstr("nccl"), HasSubstr(kNoDevice)));
}

TEST(NcclPlugin, RankZeroTellsPeersWhyItFailed) {
  SKIP_IF_GPU();
  std::string why;
  const sl_backend_t* table = LoadNcclTable(&why);
  ASSERT_NE(table, nullptr) << why;
  MemoryStore store;
  const sl_store_t cstore = store.table();
  sl_comm_config_t config{sizeof(sl_comm_config_t), 0, 2, &cstore, SL_DEVICE_CUDA, 0, 60000,
                          7, nullptr};
  sl_comm_t* comm = nullptr;
  sl_error_t err{};
  EXPECT_EQ(table->comm_create(table->ctx, &config, &comm, &err), SL_ERR_UNAVAILABLE);
  EXPECT_EQ(comm, nullptr);
  EXPECT_THAT(err.message, HasSubstr(kNoDevice));
  // The uid key carries the reason, so rank 1 fails now, not at the timeout.
  ASSERT_TRUE(store.Has("nccl/uid"));
  EXPECT_THAT(store.Value("nccl/uid"), AllOf(HasSubstr("error:"), HasSubstr(kNoDevice)));
}

TEST(NcclPlugin, BadOptionIsNamed) {
  std::string why;
  const sl_backend_t* table = LoadNcclTable(&why);
  ASSERT_NE(table, nullptr) << why;
  MemoryStore store;
  const sl_store_t cstore = store.table();
  sl_comm_config_t config{sizeof(sl_comm_config_t), 0, 1, &cstore, SL_DEVICE_CUDA, 0, 1000, 1,
                          "watchdog_ms=5;bogus=1"};
  sl_comm_t* comm = nullptr;
  sl_error_t err{};
  EXPECT_EQ(table->comm_create(table->ctx, &config, &comm, &err), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(err.message, AllOf(HasSubstr("'bogus=1'"), HasSubstr("watchdog_ms")));
}

// The dynamic loader's cache knows the CUDA folder on some machines (this
// one has /etc/ld.so.conf.d/zz-cuda-13-0.conf), so each probe runs under
// `ld.so --inhibit-cache` without LD_LIBRARY_PATH: NCCL is then found only
// through the plugin's RPATH, exactly as on a machine where CUDA is not on
// the loader's path.
std::string LoaderWithoutCache() {
  for (const char* ld : {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"}) {
    if (access(ld, X_OK) == 0) return std::string(ld) + " --inhibit-cache ";
  }
  return "";
}

CommandResult Probe(const std::string& plugin_dir, const std::string& backend) {
  return RunCommand("env -u LD_LIBRARY_PATH SYNCLINE_PLUGIN_PATH=" + plugin_dir + " " +
                    LoaderWithoutCache() + BuildBinDir() + "/nccl_load_probe " + backend);
}

TEST(NcclPlugin, MissingNcclLibraryIsNamed) {
  if (LoaderWithoutCache().empty()) GTEST_SKIP() << "no known ld.so to run the probe";
  const CommandResult r = Probe(SYNCLINE_NCCL_NORPATH_DIR, "nccl_norpath");
  ASSERT_FALSE(r.timed_out) << r.output;
  if (r.output.find("loaded:") != std::string::npos) {
    GTEST_SKIP() << "libnccl.so.2 is on this machine's default library path, so a "
                    "missing library cannot be simulated: "
                 << r.output;
  }
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("cannot load backend 'nccl_norpath'"),
                              AnyOf(HasSubstr("missing dependency libnccl.so.2"),
                                    HasSubstr("missing dependency libcudart.so")),
                              HasSubstr("Search path: " SYNCLINE_NCCL_NORPATH_DIR)));
}

TEST(NcclPlugin, RpathFindsNcclWithoutTheLoaderCache) {
  if (LoaderWithoutCache().empty()) GTEST_SKIP() << "no known ld.so to run the probe";
  const CommandResult r = Probe(BuildLibDir(), "nccl");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("missing dependency")));
  EXPECT_THAT(r.output, AnyOf(HasSubstr("loaded: nccl"), HasSubstr(kNoDevice)));
}

}  // namespace
}  // namespace syncline::testing
