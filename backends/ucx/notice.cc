// notice.cc: failure notices between the ranks of a communicator, and the
// flush before its endpoints close.
//
// When a collective fails on one rank (or the communicator is aborted), the
// others may not be able to tell: over shared memory an alive-but-failed
// rank looks exactly like a slow one, and ranks that wait on the failed
// rank only transitively would sit until their own deadlines. So the
// failing rank sends a short notice (its error message) to every peer. Each
// communicator keeps one receive for notices posted at all times, matching
// any source (tag.h: seq 0, step kTagNoticeStep). A notice breaks the
// receiving communicator for collectives, with the sender's reason in the
// error. Notices are sent once per communicator and never answered, so
// they cannot echo.
//
// Thread safety: everything here runs on the driver (driver_mu_ held); the
// callbacks run inside ucp_worker_progress.
#include <algorithm>
#include <string>

#include "backends/ucx/communicator.h"
#include "backends/ucx/tag.h"

namespace syncline::ucx_backend {

void Communicator::NoticeAbort() {
  if (driver_broken_) return;
  if (notice_from_ < 0) SendNotice("the communicator was aborted on " + Where());
  driver_broken_ = true;
}

void Communicator::PostNoticeRecv() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_DATATYPE |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  param.datatype = ucp_dt_make_contig(1);
  param.user_data = this;
  param.cb.recv = &Communicator::OnNotice;
  notice_request_ = nullptr;
  void* request = ucp_tag_recv_nbx(worker_.get(), notice_in_, sizeof(notice_in_) - 1,
                                   CollectiveTag(comm_bits_, 0, 0, kTagNoticeStep),
                                   kTagAnySourceMask, &param);
  // The callback may have run inside the call (notice_from_ set, request freed).
  if (!UCS_PTR_IS_ERR(request) && notice_from_ < 0 && request != nullptr) {
    notice_request_ = request;
  }
}

void Communicator::OnNotice(void* request, ucs_status_t status,
                            const ucp_tag_recv_info_t* info, void* user)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto* comm = static_cast<Communicator*>(user);
  comm->notice_request_ = nullptr;
  // `info` lives in the request: read it before freeing.
  if (status == UCS_OK && info != nullptr) {  // not cancelled at shutdown
    const size_t len = std::min(info->length, sizeof(comm->notice_in_) - 1);
    comm->notice_from_ = UnpackTag(info->sender_tag).source;
    comm->notice_text_.assign(comm->notice_in_, len);
  }
  ucp_request_free(request);
}

void Communicator::SendNotice(const std::string& reason) {
  notice_out_ = reason.substr(0, sizeof(notice_in_) - 1);
  const uint64_t tag = CollectiveTag(comm_bits_, rank_, 0, kTagNoticeStep);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !dead_[r].empty()) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    // Fire and forget: the request frees itself; notice_out_ outlives it
    // because the endpoints are closed before the communicator's members go.
    param.cb.send = [](void* request, ucs_status_t, void*) { ucp_request_free(request); };
    void* request = ucp_tag_send_nbx(eps_[r], notice_out_.data(), notice_out_.size(), tag,
                                     &param);
    (void)request;
  }
}

void Communicator::Flush(Clock::time_point deadline) {
  ucp_request_param_t param{};
  void* request = ucp_worker_flush_nbx(worker_.get(), &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline) {
    ucp_worker_progress(worker_.get());
  }
  if (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_request_cancel(worker_.get(), request);
  ucp_request_free(request);
}

}  // namespace syncline::ucx_backend
