// interposer.cc: the wrapped table's entry points; see interposer.h.
//
// comm_create is the one entry point that receives no handle of ours: it
// gets the wrapped table's ctx, the Layer (this plugin's info and the next
// layer) that Wrap() made for that table. Every other entry point finds
// the next layer through the WrappedComm or WrappedRequest it is handed.
#include "syncline/plugin_sdk/interposer.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "syncline/plugin_sdk/error.h"

namespace syncline::plugin {

struct LayerAccess {
  static void Set(WrappedComm* comm, const InterposerInfo* info) { comm->info_ = info; }
  static const InterposerInfo* Get(const WrappedComm* comm) { return comm->info_; }
};

namespace {

using backend::SlGuard;
using backend::SlGuardVoid;
using backend::SlSetError;

// One wrapped table: made under the mutex and never changed or freed
// afterwards (the ABI says a wrapped table lives until the process exits).
struct Layer {
  const InterposerInfo* info = nullptr;
  const sl_backend_t* next = nullptr;
  std::string version;
  sl_backend_t table{};
};

std::mutex g_layers_mu;
std::vector<std::unique_ptr<Layer>>& Layers() {
  static auto* layers = new std::vector<std::unique_ptr<Layer>>();  // intentionally leaked
  return *layers;
}

WrappedComm* Unwrap(sl_comm_t* comm) { return reinterpret_cast<WrappedComm*>(comm); }
WrappedRequest* Unwrap(sl_request_t* request) {
  return reinterpret_cast<WrappedRequest*>(request);
}

sl_result_t CommCreate(void* ctx, const sl_comm_config_t* config, sl_comm_t** comm,
                       sl_error_t* err) {
  const Layer* layer = static_cast<const Layer*>(ctx);
  return SlGuard(err, layer->info->name, [&] {
    if (config == nullptr || comm == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "%s comm_create: null config or output pointer",
                        layer->info->name);
    }
    std::unique_ptr<WrappedComm> created;
    const sl_result_t rc = layer->info->create(layer->next, *config, &created, err);
    if (rc != SL_OK) return rc;
    LayerAccess::Set(created.get(), layer->info);
    *comm = reinterpret_cast<sl_comm_t*>(created.release());
    return SL_OK;
  });
}

sl_result_t CommSplit(sl_comm_t* parent, int32_t color, int32_t key, const sl_store_t* store,
                      uint64_t new_comm_id, sl_comm_t** child, sl_error_t* err) {
  return SlGuard(err, "interposer comm_split", [&] {
    if (parent == nullptr || child == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "comm_split: null communicator or output pointer");
    }
    *child = nullptr;
    WrappedComm* wrapped_parent = Unwrap(parent);
    const InterposerInfo* info = LayerAccess::Get(wrapped_parent);
    sl_comm_t* inner = nullptr;
    sl_comm_config_t config{};
    const sl_result_t rc =
        wrapped_parent->SplitInner(color, key, store, new_comm_id, &inner, &config, err);
    if (rc != SL_OK || inner == nullptr) return rc;  // color < 0: no child
    std::unique_ptr<WrappedComm> made;
    const sl_result_t wrapped = info->wrap(wrapped_parent->next(), inner, config, &made, err);
    if (wrapped != SL_OK) {
      wrapped_parent->next()->comm_destroy(inner);
      return wrapped;
    }
    LayerAccess::Set(made.get(), info);
    *child = reinterpret_cast<sl_comm_t*>(made.release());
    return SL_OK;
  });
}

void CommDestroy(sl_comm_t* comm) {
  SlGuardVoid("interposer comm_destroy", [&] {
    if (comm == nullptr) return;
    std::unique_ptr<WrappedComm> wrapped(Unwrap(comm));
    wrapped->OnDestroy();
    wrapped->next()->comm_destroy(wrapped->inner());
  });
}

sl_result_t CommAbort(sl_comm_t* comm, sl_error_t* err) {
  return SlGuard(err, "interposer comm_abort", [&] {
    if (comm == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "comm_abort: null communicator");
    }
    return Unwrap(comm)->Abort(err);
  });
}

sl_result_t Post(sl_comm_t* comm, const sl_op_t* op, sl_request_t** request,
                 sl_error_t* err) {
  return SlGuard(err, "interposer post", [&] {
    if (comm == nullptr || op == nullptr || request == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "post: null communicator, op or output pointer");
    }
    std::unique_ptr<WrappedRequest> posted;
    const sl_result_t rc = Unwrap(comm)->Post(*op, &posted, err);
    if (rc == SL_OK) *request = reinterpret_cast<sl_request_t*>(posted.release());
    return rc;
  });
}

sl_result_t RequestTest(sl_request_t* request, int* done, sl_error_t* err) {
  return SlGuard(err, "interposer request_test", [&] {
    if (request == nullptr || done == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                        "request_test: null request or output pointer");
    }
    return Unwrap(request)->Test(done, err);
  });
}

sl_result_t RequestWait(sl_request_t* request, int64_t timeout_ms, sl_error_t* err) {
  return SlGuard(err, "interposer request_wait", [&] {
    if (request == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "request_wait: null request");
    }
    return Unwrap(request)->Wait(timeout_ms, err);
  });
}

sl_result_t RequestStreamWait(sl_request_t* request, void* stream, sl_error_t* err) {
  return SlGuard(err, "interposer request_stream_wait", [&] {
    if (request == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "request_stream_wait: null request");
    }
    return Unwrap(request)->StreamWait(stream, err);
  });
}

void RequestFree(sl_request_t* request) {
  SlGuardVoid("interposer request_free", [&] { delete Unwrap(request); });
}

}  // namespace

WrappedRequest::~WrappedRequest() {
  if (inner_ != nullptr) next_->request_free(inner_);
}

void WrappedRequest::Finish(sl_result_t result, const sl_error_t* err) {
  if (completed_.exchange(true, std::memory_order_acq_rel)) return;
  OnComplete(result, result == SL_OK || err == nullptr ? "" : err->message);
}

sl_result_t WrappedRequest::Test(int* done, sl_error_t* err) {
  *done = 0;
  const sl_result_t rc = next_->request_test(inner_, done, err);
  if (*done) Finish(rc, err);
  return rc;
}

sl_result_t WrappedRequest::Wait(int64_t timeout_ms, sl_error_t* err) {
  const sl_result_t rc = next_->request_wait(inner_, timeout_ms, err);
  if (rc != SL_ERR_TIMEOUT) {
    Finish(rc, err);
  } else {
    // SL_ERR_TIMEOUT means either that this wait ran out (the op goes on) or
    // that the op itself timed out; only the op's end completes it.
    int done = 0;
    sl_error_t probe{};
    const sl_result_t op_rc = next_->request_test(inner_, &done, &probe);
    if (done) Finish(op_rc, &probe);
  }
  return rc;
}

sl_result_t WrappedRequest::StreamWait(void* stream, sl_error_t* err) {
  if (next_->request_stream_wait == nullptr) return Wait(-1, err);
  const sl_result_t rc = next_->request_stream_wait(inner_, stream, err);
  if (rc != SL_OK) {
    // Either the op ended with this error or the stream could not wait.
    int done = 0;
    sl_error_t probe{};
    const sl_result_t op_rc = next_->request_test(inner_, &done, &probe);
    if (done) Finish(op_rc, &probe);
  }
  return rc;
}

sl_result_t WrappedComm::PostInner(const sl_op_t& op,
                                   std::unique_ptr<WrappedRequest>* request,
                                   sl_error_t* err) {
  sl_request_t* raw = nullptr;
  const sl_result_t rc = next_->post(inner_, &op, &raw, err);
  if (rc != SL_OK) return rc;
  *request = std::make_unique<WrappedRequest>(next_, raw);
  return SL_OK;
}

sl_result_t WrappedComm::Post(const sl_op_t& op, std::unique_ptr<WrappedRequest>* request,
                              sl_error_t* err) {
  return PostInner(op, request, err);
}

sl_result_t WrappedComm::SplitInner(int32_t color, int32_t key, const sl_store_t* store,
                                    uint64_t new_comm_id, sl_comm_t** child,
                                    sl_comm_config_t* child_config, sl_error_t* err) {
  // Every rank's (color, key), over the inner communicator. Its seq (bit 63
  // and bit 30) is none of the core's, nor check's fingerprint exchanges'.
  const uint64_t split = splits_.fetch_add(1) + 1;
  std::vector<int64_t> mine = {color, key};
  std::vector<int64_t> all(2 * static_cast<size_t>(size_));
  sl_op_t x = sl_op_init(SL_OP_ALLGATHER);
  x.seq = SL_SEQ_INTERPOSER_BIT | SL_SEQ_SPLIT_BIT | split;
  x.send = sl_buffer_t{mine.data(), mine.size(), SL_I64, SL_DEVICE_CPU, 0, nullptr};
  x.recv = sl_buffer_t{all.data(), all.size(), SL_I64, SL_DEVICE_CPU, 0, nullptr};
  x.timeout_ms = timeout_ms_;
  sl_request_t* request = nullptr;
  sl_result_t rc = next_->post(inner_, &x, &request, err);
  if (rc != SL_OK) return rc;
  // No wait timeout: the buffers are ours, and the op fails by its deadline.
  rc = next_->request_wait(request, -1, err);
  next_->request_free(request);
  if (rc != SL_OK) return rc;
  int child_rank = 0, child_size = 0;
  for (int r = 0; r < size_; ++r) {
    if (color < 0 || all[2 * r] != color) continue;
    const bool before = all[2 * r + 1] < key || (all[2 * r + 1] == key && r < rank_);
    if (before) ++child_rank;
    ++child_size;
  }
  *child_config = sl_comm_config_t{sizeof(sl_comm_config_t), child_rank,    child_size,  store,       device_,
                                   device_index_, timeout_ms_, new_comm_id, nullptr};
  return next_->comm_split(inner_, color, key, store, new_comm_id, child, err);
}

sl_result_t CreateInner(const sl_backend_t* next, const sl_comm_config_t& config,
                        sl_comm_t** inner, sl_error_t* err) {
  *inner = nullptr;
  const sl_result_t rc = next->comm_create(next->ctx, &config, inner, err);
  if (rc == SL_OK && *inner == nullptr) {
    return SlSetError(err, SL_ERR_INTERNAL, "%s comm_create returned no communicator",
                      next->name);
  }
  return rc;
}

sl_result_t CreateAndWrap(CommWrapper wrap, const sl_backend_t* next,
                          const sl_comm_config_t& config,
                          std::unique_ptr<WrappedComm>* comm, sl_error_t* err) {
  sl_comm_t* inner = nullptr;
  const sl_result_t rc = CreateInner(next, config, &inner, err);
  if (rc != SL_OK) return rc;
  const sl_result_t wrapped = wrap(next, inner, config, comm, err);
  if (wrapped != SL_OK) next->comm_destroy(inner);
  return wrapped;
}

sl_result_t Wrap(const InterposerInfo& info, const sl_backend_t* next,
                 const sl_backend_t** wrapped, sl_error_t* err) {
  return SlGuard(err, info.name, [&] {
    if (next == nullptr || wrapped == nullptr) {
      return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "%s wrap: null table or output",
                        info.name);
    }
    std::lock_guard<std::mutex> lock(g_layers_mu);
    for (const std::unique_ptr<Layer>& layer : Layers()) {
      if (layer->info == &info && layer->next == next) {
        *wrapped = &layer->table;
        return SL_OK;
      }
    }
    auto layer = std::make_unique<Layer>();
    layer->info = &info;
    layer->next = next;
    layer->version = std::string(next->version ? next->version : "?") + " +" + info.name;
    sl_backend_t& t = layer->table;
    t.abi_version = SL_ABI_VERSION;
    t.struct_size = sizeof(sl_backend_t);
    t.name = next->name;
    t.version = layer->version.c_str();
    t.caps = next->caps;
    t.ctx = layer.get();
    t.comm_create = CommCreate;
    t.comm_destroy = CommDestroy;
    t.comm_abort = CommAbort;
    // Split children are wrapped like created ones; without a next
    // comm_split (or a way to wrap, or CPU buffers for the rank exchange)
    // the core falls back to comm_create, wrapped too.
    const bool can_split = next->comm_split != nullptr && info.wrap != nullptr &&
                           (next->caps->device_mask & (1u << SL_DEVICE_CPU)) != 0;
    t.comm_split = can_split ? CommSplit : nullptr;
    t.post = Post;
    t.request_test = RequestTest;
    t.request_wait = RequestWait;
    t.request_free = RequestFree;
    // Passed through only where the next layer has it, so that the core
    // host-waits (through request_wait, and these hooks) everywhere else.
    t.request_stream_wait = next->request_stream_wait != nullptr ? RequestStreamWait : nullptr;
    *wrapped = &t;
    Layers().push_back(std::move(layer));
    return SL_OK;
  });
}

}  // namespace syncline::plugin
