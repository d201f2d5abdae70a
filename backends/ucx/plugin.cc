// plugin.cc: the UCX backend's entry point and C function table.
//
// libsyncline-backend-ucx.so exports exactly one symbol,
// syncline_backend_plugin_v1, which returns a static sl_backend_v1_t. Each
// entry unwraps the opaque handle, runs the C++ implementation under
// SlGuard (no exception crosses the ABI) and returns the result code.
//
// Capabilities: CPU buffers; every op, every dtype, every reduction on
// every dtype (reductions use backends/common's kernels). comm_split is
// left NULL: the core builds sub-groups with comm_create, and each
// communicator owns its worker (see communicator.h).
#include <memory>

#include "backends/common/error.h"
#include "backends/ucx/communicator.h"
#include "backends/ucx/work.h"
#include "syncline/plugin_abi.h"

namespace syncline::ucx_backend {
namespace {

using backend::SlGuard;
using backend::SlGuardVoid;
using backend::SlSetError;

Communicator* Unwrap(sl_comm_t* comm) { return reinterpret_cast<Communicator*>(comm); }

sl_result_t CommCreate(const sl_comm_config_t* config, sl_comm_t** comm,
                       sl_error_t* err) {
  return SlGuard(err, "ucx comm_create", [&] {
    if (config == nullptr || comm == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "ucx comm_create: null config or output pointer");
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
  SlGuardVoid("ucx comm_destroy", [&] { delete Unwrap(comm); });
}

sl_result_t CommAbort(sl_comm_t* comm, sl_error_t* err) {
  return SlGuard(err, "ucx comm_abort", [&] {
    if (comm == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "ucx comm_abort: null communicator");
    }
    Unwrap(comm)->Abort();
    backend::SlClearError(err);
    return SL_OK;
  });
}

sl_result_t Post(sl_comm_t* comm, const sl_op_t* op, sl_request_t** request,
                 sl_error_t* err) {
  return SlGuard(err, "ucx post", [&] {
    if (comm == nullptr || op == nullptr || request == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "ucx post: null communicator, op or output pointer");
    }
    std::shared_ptr<Request> posted;
    const sl_result_t rc = Unwrap(comm)->Post(*op, &posted, err);
    if (rc == SL_OK) *request = new sl_request{std::move(posted)};
    return rc;
  });
}

sl_result_t RequestTest(sl_request_t* request, int* done, sl_error_t* err) {
  return SlGuard(err, "ucx request_test", [&] {
    if (request == nullptr || done == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "ucx request_test: null request or output pointer");
    }
    return request->request->Test(done, err);
  });
}

sl_result_t RequestWait(sl_request_t* request, int64_t timeout_ms, sl_error_t* err) {
  return SlGuard(err, "ucx request_wait", [&] {
    if (request == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "ucx request_wait: null request");
    }
    return request->request->Wait(timeout_ms, err);
  });
}

void RequestFree(sl_request_t* request) {
  // The communicator's Operation holds its own reference to a running op.
  SlGuardVoid("ucx request_free", [&] { delete request; });
}

#define SL_STR_INNER(x) #x
#define SL_STR(x) SL_STR_INNER(x)

sl_backend_v1_t MakeTable() {
  sl_backend_v1_t table{};
  table.abi_version = SL_ABI_VERSION;
  table.struct_size = sizeof(sl_backend_v1_t);
  table.name = "ucx";
  table.version = "syncline-ucx 0.1 (built against UCX " SL_STR(UCP_API_MAJOR) "." SL_STR(
      UCP_API_MINOR) ", UCP tag API)";
  const uint32_t all_dtypes = (1u << SL_DTYPE_COUNT) - 1;
  table.caps.device_mask = 1u << SL_DEVICE_CPU;
  table.caps.op_mask = (1u << SL_OP_KIND_COUNT) - 1;
  table.caps.dtype_mask = all_dtypes;
  for (int op = 0; op < SL_REDOP_COUNT; ++op) table.caps.reduce_dtype_mask[op] = all_dtypes;
  table.comm_create = CommCreate;
  table.comm_destroy = CommDestroy;
  table.comm_abort = CommAbort;
  table.comm_split = nullptr;
  table.post = Post;
  table.request_test = RequestTest;
  table.request_wait = RequestWait;
  table.request_free = RequestFree;
  return table;
}

}  // namespace
}  // namespace syncline::ucx_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_v1_t* syncline_backend_plugin_v1(void) {
  static const sl_backend_v1_t table = syncline::ucx_backend::MakeTable();
  return &table;
}
