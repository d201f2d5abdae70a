// abi_v1_shim.h: loads backends built for plugin ABI v1 behind today's table.
//
// ABI v1 (tests/core/frozen_abi/v1/syncline/plugin_abi.h, as released) had
// no struct_size in sl_op_t, sl_comm_config_t or sl_store_t, its
// capabilities inline with a fixed reduce_dtype_mask[5], and a comm_create
// without ctx. The layouts below are v1's, under _v1 names (static_asserts
// in the .cc pin them); the shim is a current table whose entries translate
// each call and forward it to the v1 table, as NCCL's loader does with its
// net_vN plugins.
#ifndef SYNCLINE_CORE_SRC_ABI_V1_SHIM_H_
#define SYNCLINE_CORE_SRC_ABI_V1_SHIM_H_

#include <string>

#include "absl/status/statusor.h"
#include "syncline/plugin_abi.h"

extern "C" {

typedef struct sl_store_v1 {
  void* ctx;
  sl_result_t (*set)(void* ctx, const char* key, const void* value, size_t len,
                     sl_error_t* err);
  sl_result_t (*get)(void* ctx, const char* key, int64_t timeout_ms, void** value,
                     size_t* len, sl_error_t* err);
  void (*free_value)(void* ctx, void* value);
  sl_result_t (*add)(void* ctx, const char* key, int64_t delta, int64_t* result,
                     sl_error_t* err);
} sl_store_v1_t;

typedef struct sl_op_v1 {
  sl_op_kind_t kind;
  uint64_t seq;
  sl_buffer_t send;
  sl_buffer_t recv;
  sl_redop_t redop;
  int32_t root;
  int32_t peer;
  uint32_t tag;
  int64_t timeout_ms;
} sl_op_v1_t;

typedef struct sl_comm_config_v1 {
  int32_t rank;
  int32_t size;
  const sl_store_v1_t* store;
  sl_device_type_t device;
  int32_t device_index;
  int64_t timeout_ms;
  uint64_t comm_id;
  const char* options;
} sl_comm_config_v1_t;

#define SL_REDOP_COUNT_V1 5
typedef struct sl_capabilities_v1 {
  uint32_t device_mask;
  uint32_t op_mask;
  uint32_t dtype_mask;
  uint32_t reduce_dtype_mask[SL_REDOP_COUNT_V1];
} sl_capabilities_v1_t;

typedef struct sl_backend_v1 {
  uint32_t abi_version; /* 1 */
  uint32_t struct_size;
  const char* name;
  const char* version;
  sl_capabilities_v1_t caps;
  sl_result_t (*comm_create)(const sl_comm_config_v1_t* config, sl_comm_t** comm,
                             sl_error_t* err);
  void (*comm_destroy)(sl_comm_t* comm);
  sl_result_t (*comm_abort)(sl_comm_t* comm, sl_error_t* err);
  sl_result_t (*comm_split)(sl_comm_t* parent, int32_t color, int32_t key,
                            const sl_store_v1_t* store, uint64_t new_comm_id,
                            sl_comm_t** child, sl_error_t* err);
  sl_result_t (*post)(sl_comm_t* comm, const sl_op_v1_t* op, sl_request_t** request,
                      sl_error_t* err);
  sl_result_t (*request_test)(sl_request_t* request, int* done, sl_error_t* err);
  sl_result_t (*request_wait)(sl_request_t* request, int64_t timeout_ms, sl_error_t* err);
  void (*request_free)(sl_request_t* request);
  /* appended within v1 */
  sl_result_t (*request_stream_wait)(sl_request_t* request, void* stream,
                                     sl_error_t* err);
} sl_backend_v1_t;

#define SL_BACKEND_V1_MIN_SIZE offsetof(sl_backend_v1_t, request_stream_wait)

}  // extern "C"

namespace syncline::internal {

// Checks a v1 table (abi_version 1, struct_size, required entries) and
// returns a current table that forwards to it, living as long as the
// process. `path` names the plugin in messages.
absl::StatusOr<const sl_backend_t*> AdaptV1Backend(const sl_backend_v1_t* table,
                                                   const std::string& path);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_ABI_V1_SHIM_H_
