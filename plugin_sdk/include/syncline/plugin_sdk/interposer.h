// interposer.h: the skeleton every interposer plugin (check, trace, faults)
// is built on.
//
// An interposer receives the next layer's sl_backend_t (a backend, or the
// next interposer of SYNCLINE_PLUGINS) and returns a table whose entry points
// unwrap their handles, run the plugin's hooks and forward to the next
// layer. This file owns that plumbing so each plugin writes only its hooks:
//   - WrappedComm: per-communicator state holding the inner sl_comm_t*;
//   - WrappedRequest: per-request state holding the inner sl_request_t*,
//     with a hook that runs once when the op is seen to end;
//   - Wrap(): builds the wrapped table (see sl_interposer_t::wrap).
// Every entry point runs under SlGuard, so no C++ exception crosses the ABI.
//
// request_stream_wait (device-side waits, NCCL) is passed through when the
// next layer has it: WrappedRequest::StreamWait() forwards it, and a plugin
// whose requests are not plain forwards (check) overrides it.
//
// The wrapped table keeps the next layer's name and capabilities (so the
// core's validation and messages are unchanged) and appends "+<plugin>" to
// its version, so ranks that stack different interposers fail the core's
// backend agreement instead of deadlocking. comm_split is wrapped when the
// next layer has one and the plugin can wrap an existing communicator
// (InterposerInfo::wrap): the child the next layer splits off is wrapped
// exactly like one from comm_create. Otherwise comm_split stays NULL and
// the core builds sub-groups through comm_create, wrapped as usual.
//
// Threading: as the ABI. Post() is called by one thread at a time per
// communicator (the core serializes posts); Abort(), Test() and Wait() may
// be called from any thread.
//
// Example (a plugin that only counts posts; its communicator is made from
// (next, inner, config), so the SDK's CreateAs/WrapAs make and wrap it):
//   class CountingComm : public WrappedComm { ... Post() override ... };
//   const InterposerInfo kInfo = {"count", CreateAs<CountingComm>, WrapAs<CountingComm>};
//   extern "C" SL_PLUGIN_EXPORT const sl_interposer_t* SL_INTERPOSER_ENTRY(void) {
//     return syncline::plugin::PublishInterposer<kInfo>();
//   }
// A plugin that must refuse or prepare before the next layer creates its
// communicator writes its own `create` (and may end it with CreateAndWrap).
#ifndef SYNCLINE_PLUGIN_SDK_INTERPOSER_H_
#define SYNCLINE_PLUGIN_SDK_INTERPOSER_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "syncline/plugin_abi.h"

namespace syncline::plugin {

struct InterposerInfo;

// WrappedRequest
//
// One posted op. The destructor frees the inner request, if any (the ABI
// lets it be freed while running). Test() and Wait() forward and call OnComplete()
// exactly once, from whichever thread first sees the op end.
class WrappedRequest {
 public:
  WrappedRequest(const sl_backend_t* next, sl_request_t* inner)
      : next_(next), inner_(inner) {}
  virtual ~WrappedRequest();

  WrappedRequest(const WrappedRequest&) = delete;
  WrappedRequest& operator=(const WrappedRequest&) = delete;

  // Forward to the inner request. A subclass whose inner request comes
  // later (check hands the op over from its worker) overrides both.
  virtual sl_result_t Test(int* done, sl_error_t* err);
  virtual sl_result_t Wait(int64_t timeout_ms, sl_error_t* err);
  // request_stream_wait: forwards to the inner request (a host Wait() when
  // the next layer has none); an error return that ends the op runs
  // OnComplete(). Called only when the next layer has the entry.
  virtual sl_result_t StreamWait(void* stream, sl_error_t* err);

 protected:
  // Called once with the op's result and message ("" on success).
  virtual void OnComplete(sl_result_t /*result*/, const char* /*message*/) {}
  // For subclass destructors: true once OnComplete has run (or is running).
  bool completed() const { return completed_.load(std::memory_order_acquire); }

 private:
  void Finish(sl_result_t result, const sl_error_t* err);

  const sl_backend_t* const next_;
  sl_request_t* const inner_;
  std::atomic<bool> completed_{false};
};

// WrappedComm
//
// One communicator. Subclasses override Post() (and, if they need to, Abort()
// and OnDestroy()); the defaults forward unchanged.
class WrappedComm {
 public:
  WrappedComm(const sl_backend_t* next, sl_comm_t* inner,
              const sl_comm_config_t& config)
      : next_(next),
        inner_(inner),
        rank_(config.rank),
        size_(config.size),
        comm_id_(config.comm_id),
        timeout_ms_(config.timeout_ms),
        device_(config.device),
        device_index_(config.device_index) {}
  // Does not destroy the inner communicator: the table's comm_destroy calls
  // OnDestroy(), then the inner comm_destroy, then deletes this object.
  virtual ~WrappedComm() = default;

  WrappedComm(const WrappedComm&) = delete;
  WrappedComm& operator=(const WrappedComm&) = delete;

  virtual sl_result_t Post(const sl_op_t& op, std::unique_ptr<WrappedRequest>* request,
                           sl_error_t* err);
  virtual sl_result_t Abort(sl_error_t* err) { return next_->comm_abort(inner_, err); }
  // SplitInner()
  //
  // next()->comm_split on the inner communicator; collective over this one.
  // comm_split does not report the child's rank and size, so it first
  // allgathers (color, key) over the inner communicator (a CPU buffer;
  // Wrap() only offers comm_split over backends that move CPU buffers) and
  // fills `child_config` with the child's rank, size, comm id, store and
  // this communicator's device and timeout. Subclasses that post to the
  // inner communicator from other threads (check) override it to let those
  // posts drain first, so that every rank's inner op order stays the same.
  virtual sl_result_t SplitInner(int32_t color, int32_t key, const sl_store_t* store,
                                 uint64_t new_comm_id, sl_comm_t** child,
                                 sl_comm_config_t* child_config, sl_error_t* err);
  // Runs before the inner communicator is destroyed (e.g. to write files).
  virtual void OnDestroy() {}

  // Posts `op` on the inner communicator and wraps its request in a plain
  // WrappedRequest. Subclasses use it for ops they do not need to watch.
  sl_result_t PostInner(const sl_op_t& op, std::unique_ptr<WrappedRequest>* request,
                        sl_error_t* err);

  const sl_backend_t* next() const { return next_; }
  sl_comm_t* inner() const { return inner_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  uint64_t comm_id() const { return comm_id_; }
  // The communicator's default op deadline (config.timeout_ms).
  int64_t timeout_ms() const { return timeout_ms_; }

 private:
  const sl_backend_t* const next_;
  sl_comm_t* const inner_;
  const int rank_;
  const int size_;
  const uint64_t comm_id_;
  const int64_t timeout_ms_;
  const sl_device_type_t device_;
  const int32_t device_index_;
  std::atomic<uint64_t> splits_{0};  // tells the exchanges of successive splits apart
  // The plugin this communicator belongs to (set by the wrapped table's
  // comm_create and comm_split), for wrapping split children.
  friend struct LayerAccess;
  const InterposerInfo* info_ = nullptr;
};

// A plugin's communicator factory: creates the inner communicator (usually
// with CreateInner) and wraps it. Fills `err` on failure.
using CommFactory = sl_result_t (*)(const sl_backend_t* next,
                                    const sl_comm_config_t& config,
                                    std::unique_ptr<WrappedComm>* comm, sl_error_t* err);

// A plugin's wrapper for a communicator the next layer has already made
// (comm_split's child): wraps `inner` as `create` would have wrapped the one
// it made; on failure, leaves `inner` to the caller (which destroys it).
using CommWrapper = sl_result_t (*)(const sl_backend_t* next, sl_comm_t* inner,
                                    const sl_comm_config_t& config,
                                    std::unique_ptr<WrappedComm>* comm, sl_error_t* err);

struct InterposerInfo {
  const char* name;  // "check", used in the version string and in messages
  CommFactory create;
  // Wraps split children; NULL leaves the wrapped table's comm_split NULL.
  CommWrapper wrap = nullptr;
};

// CreateInner()
//
// next->comm_create(config), with a null check.
sl_result_t CreateInner(const sl_backend_t* next, const sl_comm_config_t& config,
                        sl_comm_t** inner, sl_error_t* err);

// CreateAndWrap()
//
// The usual `create`: next->comm_create(config) (CreateInner), then `wrap`
// the new communicator as a split child is wrapped. If `wrap` fails, the
// new communicator is destroyed and `wrap`'s result returned.
sl_result_t CreateAndWrap(CommWrapper wrap, const sl_backend_t* next,
                          const sl_comm_config_t& config,
                          std::unique_ptr<WrappedComm>* comm, sl_error_t* err);

// WrapAs<Comm>, CreateAs<Comm>
//
// A CommWrapper and a CommFactory for a plugin whose communicator is
// constructed as Comm(next, inner, config): `wrap` and `create` of its
// InterposerInfo.
template <typename Comm>
sl_result_t WrapAs(const sl_backend_t* next, sl_comm_t* inner,
                   const sl_comm_config_t& config, std::unique_ptr<WrappedComm>* comm,
                   sl_error_t* /*err*/) {
  *comm = std::make_unique<Comm>(next, inner, config);
  return SL_OK;
}

template <typename Comm>
sl_result_t CreateAs(const sl_backend_t* next, const sl_comm_config_t& config,
                     std::unique_ptr<WrappedComm>* comm, sl_error_t* err) {
  return CreateAndWrap(&WrapAs<Comm>, next, config, comm, err);
}

// Wrap()
//
// Implements sl_interposer_t::wrap for `info` (which must outlive the
// process, e.g. a static). Wrapping the same `next` twice returns the same
// table; any number of distinct tables may be wrapped (the same plugin may
// be stacked on itself): each wrapped table's `ctx` holds its layer's state
// (`info` and `next`), and every other entry finds it through the
// WrappedComm or WrappedRequest it is handed.
sl_result_t Wrap(const InterposerInfo& info, const sl_backend_t* next,
                 const sl_backend_t** wrapped, sl_error_t* err);

// PublishInterposer()
//
// The table SL_INTERPOSER_ENTRY returns for the plugin `kInfo` (a constant
// with static storage): its `wrap` is Wrap(kInfo, ...).
template <const InterposerInfo& kInfo>
const sl_interposer_t* PublishInterposer() {
  static const sl_interposer_t table = {
      SL_ABI_VERSION, sizeof(sl_interposer_t), kInfo.name,
      [](const sl_backend_t* next, const sl_backend_t** wrapped, sl_error_t* err) {
        return Wrap(kInfo, next, wrapped, err);
      }};
  return &table;
}

}  // namespace syncline::plugin

#endif  // SYNCLINE_PLUGIN_SDK_INTERPOSER_H_
