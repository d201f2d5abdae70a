#include "backends/ucx/ucx_handles.h"

#include <chrono>

namespace syncline::ucx_backend {

UcpContext::~UcpContext() {
  if (context_ != nullptr) ucp_cleanup(context_);
}

ucs_status_t UcpContext::Init(const std::string& net_devices) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return status;
  if (!net_devices.empty()) {
    status = ucp_config_modify(config, "NET_DEVICES", net_devices.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      return status;
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  return status;
}

UcpWorker::~UcpWorker() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
}

ucs_status_t UcpWorker::Init(ucp_context_h context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucs_status_t status = ucp_worker_create(context, &params, &worker_);
  if (status != UCS_OK) return status;
  ucp_address_t* address = nullptr;
  size_t length = 0;
  status = ucp_worker_get_address(worker_, &address, &length);
  if (status != UCS_OK) return status;
  address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);
  return ucp_worker_get_efd(worker_, &event_fd_);
}

Endpoints::~Endpoints() { Close(); }

void Endpoints::Reset(ucp_worker_h worker, int size) {
  Close();
  worker_ = worker;
  eps_.assign(size, nullptr);
}

void Endpoints::Close() {
  // Force mode: a peer may be dead, and a graceful close would wait for it.
  std::vector<void*> pending;
  for (ucp_ep_h& ep : eps_) {
    if (ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* request = ucp_ep_close_nbx(ep, &param);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) pending.push_back(request);
    ep = nullptr;
  }
  // Bounded: a forced close needs no peer, only local progress.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (void* request : pending) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < deadline) {
      ucp_worker_progress(worker_);
    }
    ucp_request_free(request);
  }
}

}  // namespace syncline::ucx_backend
