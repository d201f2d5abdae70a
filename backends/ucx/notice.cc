// notice.cc: failure notices between the ranks of a communicator.
//
// When a collective fails on one rank (or the communicator is aborted), the
// others may not be able to tell: over shared memory an alive-but-failed
// rank looks exactly like a slow one, and ranks that wait on the failed
// rank only transitively would sit until their own deadlines. So the
// failing rank sends a short notice (its error message) to every peer. Each
// communicator keeps one receive for notices posted at all times, matching
// any source (tag.h: seq 0, step kTagNoticeStep, in the communicator's own
// tag space, so a notice never crosses into the parent or a sibling of a
// split family). A notice breaks the receiving communicator for
// collectives, with the sender's reason in the error. Notices are sent once per communicator and never answered, so
// they cannot echo.
//
// The receive's buffer lives in a NoticeSlot that the Transport adopts if
// UCP still holds it when the communicator goes; each sent notice carries
// its own heap copy of the text, freed by its completion, since the shared
// endpoints may outlive the communicator.
//
// Thread safety: everything here runs on the driver (the Transport's driver
// lock held); the callbacks run inside ucp_worker_progress.
#include <algorithm>
#include <string>

#include "backends/ucx/communicator.h"
#include "backends/ucx/tag.h"

namespace syncline::ucx_backend {

void Communicator::NoticeAbort() {
  if (driver_broken_) return;
  if (notice_->from < 0) SendNotice("the communicator was aborted on " + Where());
  driver_broken_ = true;
}

void Communicator::PostNoticeRecv() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_DATATYPE |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  param.datatype = ucp_dt_make_contig(1);
  NoticeSlot* slot = notice_.get();
  param.user_data = slot;
  param.cb.recv = &Communicator::OnNotice;
  slot->request = nullptr;
  void* request = ucp_tag_recv_nbx(transport_->worker(), slot->in, sizeof(slot->in) - 1,
                                   CollectiveTag(space_, 0, 0, kTagNoticeStep),
                                   kTagAnySourceMask, &param);
  // The callback may have run inside the call (slot->from set, request freed).
  if (!UCS_PTR_IS_ERR(request) && slot->from < 0 && request != nullptr) {
    slot->request = request;
  }
}

void Communicator::OnNotice(void* request, ucs_status_t status,
                            const ucp_tag_recv_info_t* info, void* user) {
  auto* slot = static_cast<NoticeSlot*>(user);
  slot->request = nullptr;
  // `info` lives in the request: read it before freeing.
  if (status == UCS_OK && info != nullptr) {  // not cancelled at shutdown
    const size_t len = std::min(info->length, sizeof(slot->in) - 1);
    slot->from = UnpackTag(info->sender_tag).source;
    slot->text.assign(slot->in, len);
  }
  ucp_request_free(request);
}

void Communicator::SendNotice(const std::string& reason) {
  const std::string text = reason.substr(0, sizeof(notice_->in) - 1);
  const uint64_t tag = CollectiveTag(space_, rank_, 0, kTagNoticeStep);
  for (int r = 0; r < size_; ++r) {
    // Only peers this rank has talked to (connected lazily, transport.h):
    // they pass the notice on to theirs, so it spreads along the
    // communication graph without connecting to everyone.
    if (r == rank_ || !dead_[r].empty() || eps_[r] == nullptr) continue;
    // Fire and forget: the request frees itself and its copy of the text.
    auto* copy = new std::string(text);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    param.user_data = copy;
    param.cb.send = [](void* request, ucs_status_t, void* user) {
      delete static_cast<std::string*>(user);
      ucp_request_free(request);
    };
    void* request = ucp_tag_send_nbx(eps_[r], copy->data(), copy->size(), tag, &param);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) delete copy;  // no callback
  }
}

}  // namespace syncline::ucx_backend
