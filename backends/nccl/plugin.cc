// plugin.cc: the NCCL backend's entry point and C function table.
//
// libsyncline-backend-nccl.so exports exactly one symbol,
// SL_BACKEND_ENTRY (syncline_backend_plugin_v2), which returns a static
// sl_backend_t. Each
// entry is a thin adapter: it unwraps the opaque handle, runs the C++
// implementation under SlGuard (no exception crosses the ABI), and returns
// the result code.
//
// Loading the plugin touches no GPU: it needs libnccl.so.2 and libcudart
// (found through the RPATH set at build time), and nothing else until
// comm_create. On a machine without a GPU it therefore loads, reports its
// capabilities, and fails comm_create with SL_ERR_UNAVAILABLE.
//
// Capabilities: every op; the eight ABI dtypes (NCCL has all of them,
// including bf16); every reduction, AVG included (ncclAvg), on every dtype;
// CUDA buffers only.
//
// Beyond syncline/plugin_sdk/plugin_table.h's entries, this table fills the two
// optional ones:
//   comm_split           ncclCommSplit (split.cc), when built against NCCL
//                        2.18 or newer; NULL before, so that the core builds
//                        sub-groups with comm_create (a fresh NCCL comm
//                        bootstrapped through the store).
//   request_stream_wait  the caller's stream waits on the op's completion
//                        event without blocking the host (work.h).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <memory>

#include "backends/nccl/communicator.h"
#include "backends/nccl/ops.h"
#include "backends/nccl/work.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/plugin_table.h"

namespace syncline::nccl_backend {
namespace {

// The adapter entries are syncline/plugin_sdk/plugin_table.h's, over these classes.
struct Traits {
  using Communicator = syncline::nccl_backend::Communicator;
  using Handle = sl_request;  // defined in work.h
  static constexpr char kName[] = "nccl";
};

// "syncline-nccl 0.1 (NCCL 2.28.9, CUDA runtime 13.0)": the versions loaded
// at run time, which the core compares across ranks. Neither call needs a GPU.
const char* VersionString() {
  static char text[128];
  int nccl = 0;
  int cuda = 0;
  if (ncclGetVersion(&nccl) != ncclSuccess) nccl = 0;
  if (cudaRuntimeGetVersion(&cuda) != cudaSuccess) cuda = 0;
  std::snprintf(text, sizeof(text),
                "syncline-nccl 0.1 (NCCL %d.%d.%d, CUDA runtime %d.%d)", nccl / 10000,
                (nccl % 10000) / 100, nccl % 100, cuda / 1000, (cuda % 1000) / 10);
  return text;
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
sl_result_t CommSplit(sl_comm_t* parent, int32_t color, int32_t key, const sl_store_t* store,
                      uint64_t new_comm_id, sl_comm_t** child, sl_error_t* err) {
  return backend::SlGuard(err, "nccl comm_split", [&] {
    if (parent == nullptr || child == nullptr) {
      return backend::SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                                 "nccl comm_split: null communicator or output pointer");
    }
    std::unique_ptr<Communicator> created;
    const sl_result_t rc = reinterpret_cast<Communicator*>(parent)->Split(
        color, key, store, new_comm_id, &created, err);
    *child = reinterpret_cast<sl_comm_t*>(created.release());
    return rc;
  });
}
#endif

sl_result_t RequestStreamWait(sl_request_t* request, void* stream, sl_error_t* err) {
  return backend::SlGuard(err, "nccl request_stream_wait", [&] {
    if (request == nullptr) {
      return backend::SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                                 "nccl request_stream_wait: null request");
    }
    return request->request->StreamWait(stream, err);
  });
}

sl_backend_t MakeTable() {
  sl_backend_t table = backend::MakeBackendTable<Traits>(
      backend::Capabilities::AllOps(SL_DEVICE_CUDA, SupportedDtypeMask()));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  table.comm_split = &CommSplit;
#endif
  table.request_stream_wait = &RequestStreamWait;
  table.version = VersionString();
  return table;
}

}  // namespace
}  // namespace syncline::nccl_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
  static const sl_backend_t table = syncline::nccl_backend::MakeTable();
  return &table;
}
