// A one-rank CPU backend (f32 allreduce only) for the loader's ABI
// compatibility tests, built five ways (tests/core/CMakeLists.txt):
//   "oldabi" (against tests/core/frozen_abi/v1 alone, SL_ABI_VERSION 1):
//       a v1 plugin whose struct_size ends before request_stream_wait, the
//       field v1 appended; a poison entry (it aborts the process) sits
//       there. It loads through the core's v1 shim, which must treat that
//       entry as absent and never call it.
//   SL_TEST_TABLE_FULL  "newabi": today's table, whose request_stream_wait
//       only counts its calls.
//   SL_TEST_TABLE_SHORT "shorttable": today's table cut after the required
//       entries (request_stream_wait, poisoned, lies beyond struct_size),
//       with the shortest capabilities, listing one reduce op (sum): it
//       loads; the core host-waits and refuses max.
//   SL_TEST_TABLE_GROWN "growntable": a table from a newer header: a field
//       this loader does not know after request_stream_wait, longer
//       capabilities and more reduce ops than SL_REDOP_COUNT. It loads, and
//       its request_stream_wait is called.
//   SL_TEST_TABLE_BAD   "badsize": struct_size ends inside the required
//       entries; the loader must refuse it, saying so.
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

#if SL_ABI_VERSION == 1
sl_result_t CommCreate(const sl_comm_config_t* config, sl_comm_t** comm, sl_error_t* err) {
#else
sl_result_t CommCreate(void*, const sl_comm_config_t* config, sl_comm_t** comm,
                       sl_error_t* err) {
#endif
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
  // One rank: the sum (or max) is the input.
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
[[maybe_unused]] sl_result_t CountingStreamWait(sl_request_t*, void*, sl_error_t*) {
  ++g_stream_waits;
  return SL_OK;
}
[[maybe_unused]] sl_result_t PoisonStreamWait(sl_request_t*, void*, sl_error_t*) {
  std::fprintf(stderr, "test backend: request_stream_wait lies beyond struct_size and "
                       "must not be called\n");
  std::abort();
}

}  // namespace

extern "C" SL_PLUGIN_EXPORT int syncline_test_waits() { return g_waits; }
extern "C" SL_PLUGIN_EXPORT int syncline_test_stream_waits() { return g_stream_waits; }

// The entries and names every variant's table shares (v1's and v2's tables
// name them alike).
template <typename Table>
void FillEntries(Table& table) {
  table.abi_version = SL_ABI_VERSION;
  table.name = "abi_compat";
  table.comm_create = CommCreate;
  table.comm_destroy = CommDestroy;
  table.comm_abort = CommAbort;
  table.post = Post;
  table.request_test = RequestTest;
  table.request_wait = RequestWait;
  table.request_free = RequestFree;
}

#if SL_ABI_VERSION == 1
extern "C" SL_PLUGIN_EXPORT const sl_backend_v1_t* syncline_backend_plugin_v1() {
  static sl_backend_v1_t table = {};
  FillEntries(table);
  table.struct_size = SL_BACKEND_V1_MIN_SIZE;
  table.version = "abi_compat 1";
  table.caps.device_mask = 1u << SL_DEVICE_CPU;
  table.caps.op_mask = 1u << SL_OP_ALLREDUCE;
  table.caps.dtype_mask = 1u << SL_F32;
  table.caps.reduce_dtype_mask[SL_SUM] = 1u << SL_F32;
  table.request_stream_wait = PoisonStreamWait;
  return &table;
}
#else
namespace {

constexpr uint32_t kF32 = 1u << SL_F32;

// What a newer plugin_abi.h might have appended.
struct GrownCaps {
  sl_capabilities_t caps;
  uint32_t future_mask;
};
struct GrownTable {
  sl_backend_t table;
  sl_result_t (*future_entry)(sl_request_t*, void*, sl_error_t*);
  uint64_t future_field;
};

}  // namespace

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY() {
  // Sum and max, and two reduce ops this header does not know.
  static const uint32_t kReduce[SL_REDOP_COUNT + 2] = {kF32, 0, 0, kF32, 0, kF32, kF32};
  static GrownCaps caps = {};
  static GrownTable grown = {};
  sl_backend_t& table = grown.table;
  caps.caps.struct_size = sizeof(sl_capabilities_t);
  caps.caps.device_mask = 1u << SL_DEVICE_CPU;
  caps.caps.op_mask = 1u << SL_OP_ALLREDUCE;
  caps.caps.dtype_mask = kF32;
  caps.caps.reduce_op_count = SL_REDOP_COUNT;
  caps.caps.reduce_dtype_mask = kReduce;
  FillEntries(table);
  table.struct_size = sizeof(sl_backend_t);
  table.version = "abi_compat 2";
  table.caps = &caps.caps;
  table.request_stream_wait = CountingStreamWait;
#if SL_TEST_TABLE_SHORT
  table.struct_size = SL_BACKEND_V2_MIN_SIZE;
  table.request_stream_wait = PoisonStreamWait;
  caps.caps.struct_size = SL_CAPABILITIES_MIN_SIZE;
  caps.caps.reduce_op_count = 1;  // sum only: max lies beyond it
#elif SL_TEST_TABLE_GROWN
  table.struct_size = sizeof(GrownTable);
  grown.future_entry = PoisonStreamWait;
  grown.future_field = ~0ull;
  caps.caps.struct_size = sizeof(GrownCaps);
  caps.future_mask = ~0u;
  caps.caps.reduce_op_count = SL_REDOP_COUNT + 2;
#elif SL_TEST_TABLE_BAD
  table.struct_size = offsetof(sl_backend_t, post);
#endif
  return &table;
}
#endif
