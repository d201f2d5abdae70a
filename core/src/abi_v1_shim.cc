// abi_v1_shim.cc: a current table in front of a v1 backend; see abi_v1_shim.h.
//
// State: the shim table's ctx is its ShimTable (which holds the v1 table);
// each communicator and request handle the shim gives out wraps the v1
// plugin's own handle with that table, so no entry needs a global.
#include "abi_v1_shim.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "syncline/log.h"

namespace syncline::internal {
namespace {

// v1's layout as released (x86-64 / aarch64 LP64): the frozen header's
// sizes, so that a mistake in the copy above fails the build.
static_assert(sizeof(void*) != 8 || sizeof(sl_op_v1_t) == 120, "v1 sl_op_t");
static_assert(sizeof(void*) != 8 || sizeof(sl_comm_config_v1_t) == 48, "v1 config");
static_assert(sizeof(void*) != 8 || sizeof(sl_store_v1_t) == 40, "v1 store");
static_assert(sizeof(void*) != 8 || offsetof(sl_backend_v1_t, comm_create) == 56,
              "v1 table");
static_assert(sizeof(void*) != 8 || SL_BACKEND_V1_MIN_SIZE == 120, "v1 table size");

struct ShimTable {
  sl_backend_t table{};
  sl_capabilities_t caps{};
  uint32_t reduce_masks[SL_REDOP_COUNT] = {};
  const sl_backend_v1_t* v1 = nullptr;
  bool has_stream_wait = false;
};

struct ShimComm {
  const ShimTable* shim;
  sl_comm_t* inner = nullptr;
  sl_store_v1_t store{};  // v1's view of the core's store, while the comm lives
};

struct ShimRequest {
  const sl_backend_v1_t* v1;
  sl_request_t* inner;
};

ShimComm* Unwrap(sl_comm_t* comm) { return reinterpret_cast<ShimComm*>(comm); }
ShimRequest* Unwrap(sl_request_t* request) { return reinterpret_cast<ShimRequest*>(request); }

sl_result_t OutOfMemory(sl_error_t* err) {
  if (err != nullptr) std::snprintf(err->message, sizeof(err->message), "v1 shim: out of memory");
  return SL_ERR_UNAVAILABLE;
}

sl_store_v1_t ToV1(const sl_store_t* store) {
  sl_store_v1_t s{};
  if (store != nullptr) {
    s = sl_store_v1_t{store->ctx, store->set, store->get, store->free_value, store->add};
  }
  return s;
}

sl_op_v1_t ToV1(const sl_op_t& op) {
  return sl_op_v1_t{op.kind, op.seq, op.send, op.recv, op.redop,
                    op.root, op.peer, op.tag, op.timeout_ms};
}

sl_result_t CommCreate(void* ctx, const sl_comm_config_t* config, sl_comm_t** comm,
                       sl_error_t* err) {
  const ShimTable* shim = static_cast<const ShimTable*>(ctx);
  std::unique_ptr<ShimComm> made(new (std::nothrow) ShimComm{shim});
  if (made == nullptr) return OutOfMemory(err);
  made->store = ToV1(config->store);
  const sl_comm_config_v1_t c{config->rank,         config->size,
                              config->store != nullptr ? &made->store : nullptr,
                              config->device,       config->device_index,
                              config->timeout_ms,   config->comm_id,
                              config->options};
  const sl_result_t rc = shim->v1->comm_create(&c, &made->inner, err);
  if (rc == SL_OK) *comm = reinterpret_cast<sl_comm_t*>(made.release());
  return rc;
}

void CommDestroy(sl_comm_t* comm) {
  std::unique_ptr<ShimComm> shim_comm(Unwrap(comm));
  shim_comm->shim->v1->comm_destroy(shim_comm->inner);
}

sl_result_t CommAbort(sl_comm_t* comm, sl_error_t* err) {
  return Unwrap(comm)->shim->v1->comm_abort(Unwrap(comm)->inner, err);
}

sl_result_t CommSplit(sl_comm_t* parent, int32_t color, int32_t key, const sl_store_t* store,
                      uint64_t new_comm_id, sl_comm_t** child, sl_error_t* err) {
  const ShimTable* shim = Unwrap(parent)->shim;
  std::unique_ptr<ShimComm> made(new (std::nothrow) ShimComm{shim});
  if (made == nullptr) return OutOfMemory(err);
  made->store = ToV1(store);
  *child = nullptr;
  const sl_result_t rc = shim->v1->comm_split(Unwrap(parent)->inner, color, key,
                                              store != nullptr ? &made->store : nullptr,
                                              new_comm_id, &made->inner, err);
  if (rc == SL_OK && made->inner != nullptr) {
    *child = reinterpret_cast<sl_comm_t*>(made.release());
  }
  return rc;
}

sl_result_t Post(sl_comm_t* comm, const sl_op_t* op, sl_request_t** request,
                 sl_error_t* err) {
  const sl_backend_v1_t* v1 = Unwrap(comm)->shim->v1;
  std::unique_ptr<ShimRequest> made(new (std::nothrow) ShimRequest{v1, nullptr});
  if (made == nullptr) return OutOfMemory(err);
  const sl_op_v1_t old = ToV1(*op);
  const sl_result_t rc = v1->post(Unwrap(comm)->inner, &old, &made->inner, err);
  if (rc == SL_OK) *request = reinterpret_cast<sl_request_t*>(made.release());
  return rc;
}

sl_result_t RequestTest(sl_request_t* request, int* done, sl_error_t* err) {
  return Unwrap(request)->v1->request_test(Unwrap(request)->inner, done, err);
}

sl_result_t RequestWait(sl_request_t* request, int64_t timeout_ms, sl_error_t* err) {
  return Unwrap(request)->v1->request_wait(Unwrap(request)->inner, timeout_ms, err);
}

sl_result_t RequestStreamWait(sl_request_t* request, void* stream, sl_error_t* err) {
  return Unwrap(request)->v1->request_stream_wait(Unwrap(request)->inner, stream, err);
}

void RequestFree(sl_request_t* request) {
  std::unique_ptr<ShimRequest> r(Unwrap(request));
  r->v1->request_free(r->inner);
}

}  // namespace

absl::StatusOr<const sl_backend_t*> AdaptV1Backend(const sl_backend_v1_t* t,
                                                   const std::string& path) {
  if (t == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": plugin returned no table"));
  }
  if (t->abi_version != 1) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: its entry point syncline_backend_plugin_v1 returned a table of ABI "
        "version %u (expected 1); rebuild the plugin against this Syncline",
        path, t->abi_version));
  }
  if (t->struct_size < SL_BACKEND_V1_MIN_SIZE) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: plugin table (ABI v1) is %u bytes, expected at least %u; rebuild the plugin",
        path, t->struct_size, SL_BACKEND_V1_MIN_SIZE));
  }
  if (t->name == nullptr || t->comm_create == nullptr || t->comm_destroy == nullptr ||
      t->comm_abort == nullptr || t->post == nullptr || t->request_test == nullptr ||
      t->request_wait == nullptr || t->request_free == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": plugin table lacks a required entry point"));
  }
  static std::mutex mu;
  static auto* shims = new std::map<const sl_backend_v1_t*, std::unique_ptr<ShimTable>>();
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<ShimTable>& shim = (*shims)[t];
  if (shim != nullptr) return &shim->table;
  shim = std::make_unique<ShimTable>();
  shim->v1 = t;
  // v1 tables grew once, by request_stream_wait: read it only if present.
  shim->has_stream_wait = t->struct_size >= sizeof(sl_backend_v1_t) &&
                          t->request_stream_wait != nullptr;
  for (int op = 0; op < SL_REDOP_COUNT_V1 && op < SL_REDOP_COUNT; ++op) {
    shim->reduce_masks[op] = t->caps.reduce_dtype_mask[op];
  }
  shim->caps = sl_capabilities_t{sizeof(sl_capabilities_t), t->caps.device_mask,
                                 t->caps.op_mask, t->caps.dtype_mask, SL_REDOP_COUNT,
                                 shim->reduce_masks};
  sl_backend_t& n = shim->table;
  n.abi_version = SL_ABI_VERSION;
  n.struct_size = sizeof(sl_backend_t);
  n.name = t->name;
  n.version = t->version;
  n.caps = &shim->caps;
  n.ctx = shim.get();
  n.comm_create = CommCreate;
  n.comm_destroy = CommDestroy;
  n.comm_abort = CommAbort;
  n.comm_split = t->comm_split != nullptr ? CommSplit : nullptr;
  n.post = Post;
  n.request_test = RequestTest;
  n.request_wait = RequestWait;
  n.request_free = RequestFree;
  n.request_stream_wait = shim->has_stream_wait ? RequestStreamWait : nullptr;
  SL_LOG(DEBUG, "%s: a plugin for ABI v1 (table of %u bytes), loaded through the v1 shim",
         path, t->struct_size);
  return &n;
}

}  // namespace syncline::internal
