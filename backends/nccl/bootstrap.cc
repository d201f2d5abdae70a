#include "backends/nccl/bootstrap.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

// Non-blocking communicators, ncclCommInitRankConfig and ncclCommFinalize
// arrived in NCCL 2.14; ncclAvg and bf16 are older.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the Syncline NCCL backend needs NCCL 2.14 or newer"
#endif

namespace syncline::nccl_backend {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUidKey[] = "nccl/uid";
constexpr char kErrorPrefix[] = "error:";
// Init takes hundreds of milliseconds; polling every millisecond costs
// nothing measurable and reacts quickly to the deadline.
constexpr std::chrono::milliseconds kInitPoll(1);
// Ranks listed by name in a timeout message before "and N more".
constexpr int kMaxListed = 16;

int64_t MillisLeft(Clock::time_point deadline) {
  return std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
             .count());
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string RankKey(const char* what, int rank) {
  return std::string("nccl/") + what + "/" + std::to_string(rank);
}

// A non-blocking read of a counter: adding 0 returns its value (0 if unset).
bool ReadCounter(const sl_store_t& store, const std::string& key, int64_t* value,
                 std::string* error) {
  sl_error_t err{};
  if (store.add(store.ctx, key.c_str(), 0, value, &err) == SL_OK) return true;
  *error = err.message;
  return false;
}

std::string ListRanks(const std::vector<int>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size() && i < kMaxListed; ++i) {
    text += (i ? "," : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > kMaxListed) {
    text += ", and " + std::to_string(ranks.size() - kMaxListed) + " more";
  }
  return text + "]";
}

// "ranks [3] never started NCCL init; ranks [1,2] started but did not finish".
std::string DescribeStragglers(const sl_store_t& store, int size) {
  std::vector<int> missing;
  std::vector<int> slow;
  std::string error;
  for (int r = 0; r < size; ++r) {
    int64_t joined = 0;
    int64_t ready = 0;
    if (!ReadCounter(store, RankKey("joined", r), &joined, &error) ||
        !ReadCounter(store, RankKey("ready", r), &ready, &error)) {
      return "could not read which ranks arrived (" + error + ")";
    }
    if (joined == 0) {
      missing.push_back(r);
    } else if (ready == 0) {
      slow.push_back(r);
    }
  }
  std::string text;
  if (!missing.empty())
    text += "ranks " + ListRanks(missing) + " never started NCCL init";
  if (!slow.empty()) {
    text += (text.empty() ? "" : "; ") + std::string("ranks ") + ListRanks(slow) +
            " started NCCL init but had not finished it";
  }
  return text.empty() ? "every rank had started NCCL init" : text;
}

// Rank 0: make the id and publish it (or publish why it could not).
sl_result_t PublishUid(const sl_store_t& store, ncclUniqueId* id, std::string* message) {
  const ncclResult_t rc = ncclGetUniqueId(id);
  sl_error_t err{};
  if (rc != ncclSuccess) {
    *message = "ncclGetUniqueId failed: " + NcclErrorText(rc, nullptr);
    const std::string value = kErrorPrefix + *message;
    (void)store.set(store.ctx, kUidKey, value.data(), value.size(), &err);
    return ToSlResult(rc);
  }
  if (store.set(store.ctx, kUidKey, id, sizeof(*id), &err) != SL_OK) {
    *message =
        std::string("could not publish the NCCL unique id in the store: ") + err.message;
    return SL_ERR_PEER;
  }
  return SL_OK;
}

sl_result_t FetchUid(const sl_store_t& store, Clock::time_point deadline,
                     ncclUniqueId* id, std::string* message) {
  void* value = nullptr;
  size_t len = 0;
  sl_error_t err{};
  if (store.get(store.ctx, kUidKey, MillisLeft(deadline), &value, &len, &err) != SL_OK) {
    *message = std::string(
                   "rank 0 did not publish the NCCL unique id in time (rank 0 "
                   "is missing, slow, or failed before NCCL init): ") +
               err.message;
    return SL_ERR_TIMEOUT;
  }
  std::string bytes(static_cast<const char*>(value), len);
  store.free_value(store.ctx, value);
  if (bytes.rfind(kErrorPrefix, 0) == 0) {
    *message = "rank 0 could not start NCCL: " + bytes.substr(sizeof(kErrorPrefix) - 1);
    return SL_ERR_PEER;
  }
  if (bytes.size() != sizeof(*id)) {
    *message = "the NCCL unique id in the store has " + std::to_string(bytes.size()) +
               " bytes, expected " + std::to_string(sizeof(*id)) +
               " (ranks run different NCCL or Syncline builds?)";
    return SL_ERR_MISMATCH;
  }
  std::memcpy(id, bytes.data(), sizeof(*id));
  return SL_OK;
}

}  // namespace

std::string NcclErrorText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') text += std::string(" (") + last + ")";
  return text;
}

sl_result_t ToSlResult(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return SL_OK;
    case ncclSystemError:
    case ncclRemoteError:
      return SL_ERR_PEER;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return SL_ERR_INVALID_ARGUMENT;
    default:
      return SL_ERR_INTERNAL;
  }
}

NcclComm& NcclComm::operator=(NcclComm&& other) noexcept {
  if (this != &other) {
    Abort();
    comm_ = std::exchange(other.comm_, nullptr);
  }
  return *this;
}

void NcclComm::Abort() {
  if (comm_ != nullptr) (void)ncclCommAbort(std::exchange(comm_, nullptr));
}

bool NcclComm::Finalize(Clock::time_point deadline) {
  if (comm_ == nullptr) return true;
  ncclResult_t state = ncclCommFinalize(comm_);
  while (state == ncclInProgress && Clock::now() < deadline) {
    std::this_thread::sleep_for(kInitPoll);
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
  }
  if (state != ncclSuccess) {
    Abort();
    return false;
  }
  (void)ncclCommDestroy(std::exchange(comm_, nullptr));
  return true;
}

void PublishBootstrapFailure(const sl_comm_config_t& config, const std::string& why) {
  if (config.rank != 0 || config.size < 2 || config.store == nullptr) return;
  const std::string value = kErrorPrefix + why;
  sl_error_t err{};
  (void)config.store->set(config.store->ctx, kUidKey, value.data(), value.size(), &err);
}

sl_result_t CreateNcclComm(const sl_comm_config_t& config, int device,
                           Clock::time_point deadline, NcclComm* out,
                           std::string* message) {
  const sl_store_t& store = *config.store;
  const Clock::time_point start = Clock::now();
  ncclUniqueId id;
  sl_result_t rc = config.rank == 0 ? PublishUid(store, &id, message)
                                    : FetchUid(store, deadline, &id, message);
  if (rc != SL_OK) return rc;
  int64_t ignored = 0;
  sl_error_t err{};
  if (store.add(store.ctx, RankKey("joined", config.rank).c_str(), 1, &ignored, &err) !=
      SL_OK) {
    *message = std::string("could not check in with the store: ") + err.message;
    return SL_ERR_PEER;
  }

  ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
  nccl_config.blocking = 0;  // so that init (and every op) can be abandoned
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  // Names the comm in NCCL's own logs and profiler traces.
  char name[64];
  std::snprintf(name, sizeof(name), "syncline-comm%" PRIu64, config.comm_id);
  nccl_config.commName = name;
#endif
  ncclComm_t raw = nullptr;
  ncclResult_t state =
      ncclCommInitRankConfig(&raw, config.size, id, config.rank, &nccl_config);
  NcclComm comm(raw);  // aborted on every early return below
  while (state == ncclInProgress) {
    if (Clock::now() >= deadline) {
      char waited[32];
      std::snprintf(waited, sizeof(waited), "%.1f", SecondsSince(start));
      *message = std::string("NCCL init did not finish within ") + waited +
                 " s on cuda:" + std::to_string(device) + ": " +
                 DescribeStragglers(store, config.size) +
                 ". The half-built communicator was aborted; check the missing "
                 "ranks' logs, or raise SYNCLINE_TIMEOUT if they are just slow";
      return SL_ERR_TIMEOUT;
    }
    std::this_thread::sleep_for(kInitPoll);
    if (ncclCommGetAsyncError(comm.get(), &state) != ncclSuccess)
      state = ncclInternalError;
  }
  if (state != ncclSuccess) {
    *message = "ncclCommInitRankConfig failed on cuda:" + std::to_string(device) + ": " +
               NcclErrorText(state, comm.get());
    if (state == ncclInvalidUsage) {
      *message +=
          " (two ranks on one GPU? NCCL needs a distinct GPU per rank: pass "
          "Device::Cuda(LOCAL_RANK) or set CUDA_VISIBLE_DEVICES per rank)";
    }
    return ToSlResult(state);
  }
  (void)store.add(store.ctx, RankKey("ready", config.rank).c_str(), 1, &ignored, &err);
  *out = std::move(comm);
  return SL_OK;
}

}  // namespace syncline::nccl_backend
