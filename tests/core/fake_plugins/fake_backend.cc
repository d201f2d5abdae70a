// A one-rank in-process backend for the core's Split tests, built twice:
// libsyncline-backend-fakesplit.so (FAKE_WITH_SPLIT=1: it has comm_split)
// and libsyncline-backend-fakenosplit.so (comm_split NULL). Every op
// completes at once (one rank: allreduce and friends copy send to recv).
// It counts its entry points in a struct the test reads with dlsym.
// libsyncline-backend-frozenv1.so is this file compiled against the frozen
// v1 header alone (tests/core/frozen_abi/v1): the code under
// SL_ABI_VERSION == 1 is what a third party wrote for ABI v1, kept as it was.
#include <cstring>

#include "syncline/plugin_abi.h"

extern "C" {
struct FakeCounters {
  int comm_create;
  int comm_split;
  int comm_destroy;
  int last_split_color;
  int last_split_had_store;
  unsigned long long last_split_comm_id;
  unsigned long long last_create_comm_id;
  char last_create_options[256];
};
SL_PLUGIN_EXPORT FakeCounters fake_counters = {0, 0, 0, 0, 0, 0, 0, {0}};
}

struct sl_comm {
  int rank;
};
struct sl_request {
  sl_result_t result;
};

namespace {

#if SL_ABI_VERSION == 1
sl_result_t Create(const sl_comm_config_t* config, sl_comm_t** comm, sl_error_t*) {
#else
sl_result_t Create(void*, const sl_comm_config_t* config, sl_comm_t** comm, sl_error_t*) {
#endif
  ++fake_counters.comm_create;
  fake_counters.last_create_comm_id = config->comm_id;
  std::strncpy(fake_counters.last_create_options, config->options ? config->options : "",
               sizeof(fake_counters.last_create_options) - 1);
  *comm = new sl_comm{config->rank};
  return SL_OK;
}

void Destroy(sl_comm_t* comm) {
  ++fake_counters.comm_destroy;
  delete comm;
}

sl_result_t Abort(sl_comm_t*, sl_error_t*) { return SL_OK; }

sl_result_t Split(sl_comm_t*, int32_t color, int32_t, const sl_store_t* store,
                  uint64_t new_comm_id, sl_comm_t** child, sl_error_t*) {
  ++fake_counters.comm_split;
  fake_counters.last_split_color = color;
  fake_counters.last_split_had_store = store != nullptr;
  fake_counters.last_split_comm_id = new_comm_id;
  *child = color < 0 ? nullptr : new sl_comm{0};
  return SL_OK;
}

sl_result_t Post(sl_comm_t*, const sl_op_t* op, sl_request_t** request, sl_error_t*) {
  if (op->send.data != nullptr && op->recv.data != nullptr &&
      op->send.data != op->recv.data && op->kind != SL_OP_SEND &&
      op->kind != SL_OP_RECV) {
    std::memmove(
        op->recv.data, op->send.data,
        op->recv.count * (op->recv.dtype == SL_F64 || op->recv.dtype == SL_I64 ? 8 : 4));
  }
  *request = new sl_request{SL_OK};
  return SL_OK;
}

sl_result_t Test(sl_request_t* request, int* done, sl_error_t*) {
  *done = 1;
  return request->result;
}

sl_result_t Wait(sl_request_t* request, int64_t, sl_error_t*) { return request->result; }

void Free(sl_request_t* request) { delete request; }

}  // namespace

// The entries and names of the table, v1's or v2's (they name them alike).
template <typename Table>
void FillEntries(Table& t) {
  t.abi_version = SL_ABI_VERSION;
  t.struct_size = sizeof(t);
  t.name = FAKE_NAME;
  t.version = "fake 1";
  t.comm_create = Create;
  t.comm_destroy = Destroy;
  t.comm_abort = Abort;
  t.comm_split = FAKE_WITH_SPLIT ? Split : nullptr;
  t.post = Post;
  t.request_test = Test;
  t.request_wait = Wait;
  t.request_free = Free;
}

constexpr uint32_t kDtypes = (1u << SL_F32) | (1u << SL_F64) | (1u << SL_I32) | (1u << SL_I64);

#if SL_ABI_VERSION == 1
extern "C" SL_PLUGIN_EXPORT const sl_backend_v1_t* syncline_backend_plugin_v1() {
  static sl_backend_v1_t table = [] {
    sl_backend_v1_t t = {};
    FillEntries(t);
    t.caps.device_mask = 1u << SL_DEVICE_CPU;
    t.caps.op_mask = (1u << SL_OP_KIND_COUNT) - 1;
    t.caps.dtype_mask = kDtypes;
    for (int op = 0; op < SL_REDOP_COUNT; ++op) t.caps.reduce_dtype_mask[op] = kDtypes;
    return t;
  }();
  return &table;
}
#else
extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY() {
  static const uint32_t kReduce[SL_REDOP_COUNT] = {kDtypes, kDtypes, kDtypes, kDtypes,
                                                   kDtypes};
  static const sl_capabilities_t kCaps = {sizeof(sl_capabilities_t), 1u << SL_DEVICE_CPU,
                                          (1u << SL_OP_KIND_COUNT) - 1, kDtypes,
                                          SL_REDOP_COUNT, kReduce};
  static sl_backend_t table = [] {
    sl_backend_t t = {};
    FillEntries(t);
    t.caps = &kCaps;
    return t;
  }();
  return &table;
}
#endif
