// ucx_handles.h: RAII owners for the UCP objects one Transport holds (one
// per split family of communicators, see transport.h).
//
// Each wrapper owns exactly one handle and releases it in its destructor, in
// the order UCP requires when they are members of one object: endpoints
// before the worker, the worker (and its address) before the context.
// Transport declares its members in that reverse order.
//
// Thread safety: none; the owner serializes use (see communicator.h).
#ifndef SYNCLINE_BACKENDS_UCX_UCX_HANDLES_H_
#define SYNCLINE_BACKENDS_UCX_UCX_HANDLES_H_

#include <ucp/api/ucp.h>

#include <string>
#include <vector>

namespace syncline::ucx_backend {

// UcpContext: ucp_init/ucp_cleanup. UCX_* environment variables are read
// here (UCX_TLS, UCX_NET_DEVICES, ...), unchanged.
class UcpContext {
 public:
  UcpContext() = default;
  ~UcpContext();
  UcpContext(const UcpContext&) = delete;
  UcpContext& operator=(const UcpContext&) = delete;
  // Tag matching plus wakeup (the worker's event fd). Returns the UCX error.
  // `net_devices`: when non-empty, overrides UCX_NET_DEVICES.
  ucs_status_t Init(const std::string& net_devices = "");
  ucp_context_h get() const { return context_; }

 private:
  ucp_context_h context_ = nullptr;
};

// UcpWorker: ucp_worker_create/destroy, plus the worker's address and event
// fd. Serialized thread mode: only the thread that holds the Transport's
// driver lock calls into it (ucp_worker_signal excepted, which UCP allows
// from any thread).
class UcpWorker {
 public:
  UcpWorker() = default;
  ~UcpWorker();
  UcpWorker(const UcpWorker&) = delete;
  UcpWorker& operator=(const UcpWorker&) = delete;
  ucs_status_t Init(ucp_context_h context);
  ucp_worker_h get() const { return worker_; }
  const std::string& address() const { return address_; }
  int event_fd() const { return event_fd_; }

 private:
  ucp_worker_h worker_ = nullptr;
  std::string address_;  // bytes of ucp_worker_get_address
  int event_fd_ = -1;    // owned by the worker
};

// Endpoints: one ucp_ep_h per peer rank (null for this rank). Close()
// force-closes them all, which also completes every send still queued on
// them (with an error), and progresses the worker until UCP has let go.
class Endpoints {
 public:
  Endpoints() = default;
  ~Endpoints();  // must run before the worker's destructor
  Endpoints(const Endpoints&) = delete;
  Endpoints& operator=(const Endpoints&) = delete;
  void Reset(ucp_worker_h worker, int size);
  ucp_ep_h& operator[](int rank) { return eps_[rank]; }
  ucp_ep_h at(int rank) const { return eps_[rank]; }
  void Close();

 private:
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
};

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_UCX_HANDLES_H_
