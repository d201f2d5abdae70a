// A one-rank CPU backend (f32 sum allreduce only) for the loader's ABI
// compatibility tests, built three ways (tests/core/CMakeLists.txt):
//   SL_TEST_TABLE_FIRST  "oldabi": built against the first release of
//       sl_backend_v1_t, so its struct_size ends before request_stream_wait.
//       A poison entry (it aborts the process) sits in that field: the
//       loader must treat it as absent and never call it.
//   SL_TEST_TABLE_FULL   "newabi": a current table whose
//       request_stream_wait only counts its calls.
//   neither              "shorttable": smaller than the first release;
//       the loader must refuse it.
// The counters are exported so that the test can read them through dlsym.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "syncline/plugin_abi.h"

namespace {

int g_waits = 0;
int g_stream_waits = 0;

struct Comm {};
struct Request {};

sl_result_t CommCreate(const sl_comm_config_t* config, sl_comm_t** comm, sl_error_t* err) {
  if (config->size != 1) {
    std::snprintf(err->message, sizeof(err->message), "test backend: one rank only");
    return SL_ERR_UNSUPPORTED;
  }
  *comm = reinterpret_cast<sl_comm_t*>(new Comm);
  return SL_OK;
}
void CommDestroy(sl_comm_t* comm) { delete reinterpret_cast<Comm*>(comm); }
sl_result_t CommAbort(sl_comm_t*, sl_error_t*) { return SL_OK; }
sl_result_t Post(sl_comm_t*, const sl_op_t* op, sl_request_t** request, sl_error_t*) {
  // One rank: the sum is the input.
  if (op->send.data != op->recv.data && op->send.count > 0) {
    std::memmove(op->recv.data, op->send.data,
                 op->send.count * sl_dtype_size(op->send.dtype));
  }
  *request = reinterpret_cast<sl_request_t*>(new Request);
  return SL_OK;
}
sl_result_t RequestTest(sl_request_t*, int* done, sl_error_t*) {
  *done = 1;
  return SL_OK;
}
sl_result_t RequestWait(sl_request_t*, int64_t, sl_error_t*) {
  ++g_waits;
  return SL_OK;
}
void RequestFree(sl_request_t* request) { delete reinterpret_cast<Request*>(request); }
sl_result_t CountingStreamWait(sl_request_t*, void*, sl_error_t*) {
  ++g_stream_waits;
  return SL_OK;
}
sl_result_t PoisonStreamWait(sl_request_t*, void*, sl_error_t*) {
  std::fprintf(stderr, "test backend: request_stream_wait lies beyond struct_size and "
                       "must not be called\n");
  std::abort();
}

}  // namespace

extern "C" SL_PLUGIN_EXPORT int syncline_test_waits() { return g_waits; }
extern "C" SL_PLUGIN_EXPORT int syncline_test_stream_waits() { return g_stream_waits; }

extern "C" SL_PLUGIN_EXPORT const sl_backend_v1_t* syncline_backend_plugin_v1() {
  static sl_backend_v1_t table = {};
  table.abi_version = SL_ABI_VERSION;
  table.name = "abi_compat";
  table.version = "abi_compat 1";
  table.caps.device_mask = 1u << SL_DEVICE_CPU;
  table.caps.op_mask = 1u << SL_OP_ALLREDUCE;
  table.caps.dtype_mask = 1u << SL_F32;
  table.caps.reduce_dtype_mask[SL_SUM] = 1u << SL_F32;
  table.comm_create = CommCreate;
  table.comm_destroy = CommDestroy;
  table.comm_abort = CommAbort;
  table.post = Post;
  table.request_test = RequestTest;
  table.request_wait = RequestWait;
  table.request_free = RequestFree;
#if SL_TEST_TABLE_FULL
  table.struct_size = sizeof(sl_backend_v1_t);
  table.request_stream_wait = CountingStreamWait;
#elif SL_TEST_TABLE_FIRST
  table.struct_size = SL_BACKEND_V1_MIN_SIZE;
  table.request_stream_wait = PoisonStreamWait;
#else
  table.struct_size = offsetof(sl_backend_v1_t, post);
#endif
  (void)CountingStreamWait;
  (void)PoisonStreamWait;
  return &table;
}
