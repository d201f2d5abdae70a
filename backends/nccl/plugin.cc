// plugin.cc: the NCCL backend's entry point and C function table.
//
// libsyncline-backend-nccl.so exports exactly one symbol,
// syncline_backend_plugin_v1, which returns a static sl_backend_v1_t. Each
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
// CUDA buffers only. comm_split is NULL: the core builds sub-groups with
// comm_create, which bootstraps a fresh NCCL comm through the store.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <memory>

#include "backends/common/error.h"
#include "backends/nccl/communicator.h"
#include "backends/nccl/ops.h"
#include "backends/nccl/work.h"
#include "syncline/plugin_abi.h"

namespace syncline::nccl_backend {
namespace {

using backend::SlGuard;
using backend::SlGuardVoid;
using backend::SlSetError;

Communicator* Unwrap(sl_comm_t* comm) { return reinterpret_cast<Communicator*>(comm); }

sl_result_t CommCreate(const sl_comm_config_t* config, sl_comm_t** comm,
                       sl_error_t* err) {
  return SlGuard(err, "nccl comm_create", [&] {
    if (config == nullptr || comm == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "nccl comm_create: null config or output pointer");
    }
    std::unique_ptr<Communicator> created;
    const sl_result_t rc = Communicator::Create(*config, &created, err);
    if (rc == SL_OK) {
      *comm = reinterpret_cast<sl_comm_t*>(created.release());
      backend::SlClearError(err);
    }
    return rc;
  });
}

void CommDestroy(sl_comm_t* comm) {
  SlGuardVoid("nccl comm_destroy", [&] { delete Unwrap(comm); });
}

sl_result_t CommAbort(sl_comm_t* comm, sl_error_t* err) {
  return SlGuard(err, "nccl comm_abort", [&] {
    if (comm == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "nccl comm_abort: null communicator");
    }
    Unwrap(comm)->Abort();
    backend::SlClearError(err);
    return SL_OK;
  });
}

sl_result_t Post(sl_comm_t* comm, const sl_op_t* op, sl_request_t** request,
                 sl_error_t* err) {
  return SlGuard(err, "nccl post", [&] {
    if (comm == nullptr || op == nullptr || request == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "nccl post: null communicator, op or output pointer");
    }
    std::shared_ptr<Request> posted;
    const sl_result_t rc = Unwrap(comm)->Post(*op, &posted, err);
    if (rc == SL_OK) *request = new sl_request{std::move(posted)};
    return rc;
  });
}

sl_result_t RequestTest(sl_request_t* request, int* done, sl_error_t* err) {
  return SlGuard(err, "nccl request_test", [&] {
    if (request == nullptr || done == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "nccl request_test: null request or output pointer");
    }
    return request->request->Test(done, err);
  });
}

sl_result_t RequestWait(sl_request_t* request, int64_t timeout_ms, sl_error_t* err) {
  return SlGuard(err, "nccl request_wait", [&] {
    if (request == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "nccl request_wait: null request");
    }
    return request->request->Wait(timeout_ms, err);
  });
}

void RequestFree(sl_request_t* request) {
  // The communicator's pending list keeps a running op's request alive.
  SlGuardVoid("nccl request_free", [&] { delete request; });
}

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

sl_backend_v1_t MakeTable() {
  sl_backend_v1_t table{};
  table.abi_version = SL_ABI_VERSION;
  table.struct_size = sizeof(sl_backend_v1_t);
  table.name = "nccl";
  table.version = VersionString();
  table.caps.device_mask = 1u << SL_DEVICE_CUDA;
  table.caps.op_mask = (1u << SL_OP_KIND_COUNT) - 1;
  table.caps.dtype_mask = SupportedDtypeMask();
  for (int op = 0; op < SL_REDOP_COUNT; ++op) {
    table.caps.reduce_dtype_mask[op] = SupportedDtypeMask();
  }
  table.comm_create = CommCreate;
  table.comm_destroy = CommDestroy;
  table.comm_abort = CommAbort;
  table.comm_split = nullptr;  // the core splits with comm_create
  table.post = Post;
  table.request_test = RequestTest;
  table.request_wait = RequestWait;
  table.request_free = RequestFree;
  return table;
}

}  // namespace
}  // namespace syncline::nccl_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_v1_t* syncline_backend_plugin_v1(void) {
  static const sl_backend_v1_t table = syncline::nccl_backend::MakeTable();
  return &table;
}
