#include "backends/ucx/operation.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "backends/ucx/tag.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::ucx_backend {

Operation::Operation(std::shared_ptr<Request> request,
                     std::shared_ptr<const Schedule> schedule, bool p2p, uint64_t seq)
    : request_(std::move(request)), schedule_(std::move(schedule)), p2p_(p2p), seq_(seq) {}

Operation::~Operation() = default;

uint64_t Operation::TagFor(const Wire& wire, const Transfer& transfer) const {
  const int source = transfer.send ? wire.rank : transfer.peer;
  if (p2p_) return P2pTag(wire.comm_bits, source, request_->op().tag);
  return CollectiveTag(wire.comm_bits, source, seq_, transfer.step);
}

void Operation::PostRound(const Wire& wire) {
  const Round& round = schedule_->rounds[round_];
  flights_.Assign(round.transfers.size(), InFlight{this, nullptr, nullptr, true, false});
  round_started_ = true;
  // Receives first, then sends: a message from a peer then finds its
  // receive posted (matched in place, not held as unexpected), and the
  // peer's rendezvous request is answered at once.
  for (size_t k = 0; k < 2 * round.transfers.size() && code_ == SL_OK; ++k) {
    const size_t i = k % round.transfers.size();
    const Transfer& t = round.transfers[i];
    if (t.send != (k >= round.transfers.size())) continue;
    InFlight& flight = flights_[i];
    flight.transfer = &t;
    ucp_request_param_t param{};
    // Memory type is stated, never detected: the backend is CPU only and
    // detection costs a lookup per call.
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_DATATYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    param.datatype = ucp_dt_make_contig(1);
    param.user_data = &flight;
    void* status_ptr;
    if (t.send && (*wire.endpoints)[t.peer] == nullptr) {
      // The connection failed (the peer is marked dead with the reason).
      status_ptr = UCS_STATUS_PTR(UCS_ERR_UNREACHABLE);
    } else if (t.send) {
      param.cb.send = &Operation::OnSend;
      status_ptr = ucp_tag_send_nbx((*wire.endpoints)[t.peer], t.data, t.bytes,
                                    TagFor(wire, t), &param);
    } else {
      // UCX 1.13 leaves recv_info unset on immediate completion, so the
      // received length would be unknown; without immediate completion the
      // callback always reports it (possibly before nbx returns).
      param.cb.recv = &Operation::OnRecv;
      param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      status_ptr = ucp_tag_recv_nbx(wire.worker, t.data, t.bytes, TagFor(wire, t),
                                    kTagFullMask, &param);
    }
    flight.posting = false;
    if (flight.completed) continue;  // the callback already ran and freed it
    ++outstanding_;
    if (status_ptr == nullptr) {  // completed at once, no callback
      OnDone(&flight, UCS_OK, t.bytes);
    } else if (UCS_PTR_IS_ERR(status_ptr)) {
      OnDone(&flight, UCS_PTR_STATUS(status_ptr), 0);
    } else {
      flight.request = status_ptr;
    }
  }
}

void Operation::OnSend(void* request, ucs_status_t status, void* user) {
  auto* flight = static_cast<InFlight*>(user);
  flight->request = nullptr;
  ucp_request_free(request);
  flight->op->OnDone(flight, status, flight->transfer->bytes);
}

void Operation::OnRecv(void* request, ucs_status_t status,
                       const ucp_tag_recv_info_t* info, void* user) {
  auto* flight = static_cast<InFlight*>(user);
  // `info` lives in the request: read it before freeing.
  const size_t received = info != nullptr ? info->length : 0;
  flight->request = nullptr;
  ucp_request_free(request);
  flight->op->OnDone(flight, status, received);
}

void Operation::OnDone(InFlight* flight, ucs_status_t status, size_t received) {
  flight->completed = true;
  // A callback inside the nbx call runs before PostRound counts the
  // transfer, and PostRound then does not count it.
  if (!flight->posting) --outstanding_;
  const Transfer& t = *flight->transfer;
  if (code_ != SL_OK) return;  // the first error wins
  if (status == UCS_ERR_CANCELED) return;
  if (status == UCS_ERR_MESSAGE_TRUNCATED || (status == UCS_OK && received != t.bytes)) {
    Fail(SL_ERR_MISMATCH, t,
         "received a message of a different size than expected (" +
             std::to_string(received) + " vs " + std::to_string(t.bytes) +
             " B): the ranks disagree about this op (count, dtype or root)");
  } else if (status != UCS_OK) {
    Fail(SL_ERR_PEER, t,
         std::string("transport error: ") + ucs_status_string(status) +
             " (the peer died, closed its endpoint, or is unreachable)");
  }
}

void Operation::Fail(sl_result_t code, const Transfer& t, const std::string& reason) {
  code_ = code;
  char where[128];
  std::snprintf(where, sizeof(where), " with peer rank %d (%s %zu B, step %u, %s)",
                t.peer, t.send ? "send" : "recv", t.bytes, t.step, Progress().c_str());
  error_ = request_->Describe() + " failed" + where + ": " + reason;
}

void Operation::RunActions(const Round& round) {
  for (const Action& a : round.actions) {
    switch (a.kind) {
      case Action::kCopy:
        std::memcpy(a.dst, a.a, a.count);
        break;
      case Action::kReduce3:
        backend::SlReduce3(a.dst, a.a, a.b, a.count, schedule_->dtype, schedule_->redop);
        break;
      case Action::kDivide:
        backend::SlDivideBy(a.dst, a.count, schedule_->dtype, request_->group_size());
        break;
    }
  }
}

bool Operation::Advance(const Wire& wire) {
  while (code_ == SL_OK) {
    if (round_ == schedule_->rounds.size()) return true;
    if (!round_started_) PostRound(wire);
    if (outstanding_ > 0 || code_ != SL_OK) break;
    RunActions(schedule_->rounds[round_]);
    ++round_;
    round_started_ = false;
  }
  return code_ != SL_OK;
}

void Operation::Cancel(ucp_worker_h worker) {
  for (InFlight& flight : flights_) {
    if (flight.request != nullptr && !flight.transfer->send) {
      ucp_request_cancel(worker, flight.request);
    }
  }
}

std::string Operation::Waiting() const {
  std::string text;
  if (!round_started_) return text;
  for (const InFlight& flight : flights_) {
    if (flight.request == nullptr) continue;
    const Transfer& t = *flight.transfer;
    char item[96];
    std::snprintf(item, sizeof(item), "%srank %d (%s %zu B, step %u)",
                  text.empty() ? "" : ", ", t.peer, t.send ? "send" : "recv", t.bytes,
                  t.step);
    text += item;
  }
  return text;
}

int Operation::OutstandingWithDead(const std::vector<std::string>& dead) const {
  if (!round_started_) return -1;
  for (const InFlight& flight : flights_) {
    if (flight.transfer == nullptr || flight.completed) continue;
    if (!dead[flight.transfer->peer].empty()) return flight.transfer->peer;
  }
  return -1;
}

std::string Operation::Progress() const {
  char text[96];
  std::snprintf(text, sizeof(text), "round %zu/%zu of %s", round_ + 1,
                schedule_->rounds.size(), schedule_->algorithm);
  return text;
}

}  // namespace syncline::ucx_backend
