// operation.h: executes one Schedule over UCP without blocking.
//
// The driver (whichever thread holds the Transport's driver lock: a waiter
// in Wait/Test, a poster, or the background progress thread) calls
// Advance() repeatedly, through the op's communicator. Advance posts the current round's sends and
// receives with ucp_tag_{send,recv}_nbx, and once UCP has completed them all
// (through the callbacks below, run inside ucp_worker_progress), runs the
// round's local actions and moves on. It never waits.
//
// Failure: the first transfer that completes with an error fails the op
// with a message naming the peer, the step and UCP's reason. Cancel() asks
// UCP to drop the receives still outstanding; sends cannot be cancelled and
// finish (or fail) when their endpoint closes. An Operation must therefore
// outlive its outstanding UCP requests: the communicator keeps failed ones
// in a zombie list (the Transport's, so they may outlive the communicator)
// until outstanding() is 0 or the worker is gone.
//
// Thread safety: every method runs on the thread that holds the driver lock.
#ifndef SYNCLINE_BACKENDS_UCX_OPERATION_H_
#define SYNCLINE_BACKENDS_UCX_OPERATION_H_

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/ucx/schedule.h"
#include "backends/ucx/work.h"

namespace syncline::ucx_backend {

// What an Operation needs of its communicator to put bytes on the wire.
struct Wire {
  ucp_worker_h worker = nullptr;
  const std::vector<ucp_ep_h>* endpoints = nullptr;  // by rank
  uint64_t comm_bits = 0;
  int rank = 0;
};

class Operation {
 public:
  // Collectives: `seq` is the communicator's collective count (tag.h).
  // Point-to-point: `p2p` is set and the tag carries op.tag instead.
  // `schedule` may be shared with other ops (schedule_cache.h says when).
  Operation(std::shared_ptr<Request> request, std::shared_ptr<const Schedule> schedule,
            bool p2p, uint64_t seq);
  ~Operation();
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  // Progresses the schedule. Returns true once it has finished: then
  // failed() says how, and error() holds the message for a failure.
  bool Advance(const Wire& wire);

  // Cancels outstanding receives (their callbacks run in a later progress).
  void Cancel(ucp_worker_h worker);

  // Peers this op is currently waiting on, e.g. "rank 2 (recv 4096 B, step 3)".
  std::string Waiting() const;
  // The first peer marked in `dead` ("" = alive) that an outstanding
  // transfer of this op still needs, or -1. Called after a progress pass,
  // so a message the peer sent before dying has been matched already.
  int OutstandingWithDead(const std::vector<std::string>& dead) const;

  Request& request() const { return *request_; }
  const std::shared_ptr<Request>& shared_request() const { return request_; }
  bool failed() const { return code_ != SL_OK; }
  sl_result_t code() const { return code_; }
  const std::string& error() const { return error_; }
  int outstanding() const { return outstanding_; }
  bool p2p() const { return p2p_; }
  bool started() const { return round_ > 0 || round_started_; }
  // "round 3/8 of ring", for messages.
  std::string Progress() const;

 private:
  struct InFlight {
    Operation* op;
    const Transfer* transfer;
    void* request;  // UCP request while outstanding, else null
    bool posting;    // inside ucp_tag_*_nbx
    bool completed;  // OnDone has run
  };
  static void OnSend(void* request, ucs_status_t status, void* user);
  static void OnRecv(void* request, ucs_status_t status,
                     const ucp_tag_recv_info_t* info, void* user);
  void OnDone(InFlight* flight, ucs_status_t status, size_t received);
  void PostRound(const Wire& wire);
  void RunActions(const Round& round);
  void Fail(sl_result_t code, const Transfer& transfer, const std::string& reason);
  uint64_t TagFor(const Wire& wire, const Transfer& transfer) const;

  std::shared_ptr<Request> request_;
  const std::shared_ptr<const Schedule> schedule_;
  const bool p2p_;
  const uint64_t seq_;
  size_t round_ = 0;
  bool round_started_ = false;
  // The current round's transfers, never resized mid-round (UCP holds
  // pointers into it). Rounds of one or two transfers, every round of the
  // latency algorithms at 2 ranks, keep them inline: no allocation per op.
  class Flights {
   public:
    Flights() = default;
    Flights(const Flights&) = delete;
    Flights& operator=(const Flights&) = delete;
    void Assign(size_t n, const InFlight& value) {
      if (n <= kInline) {
        data_ = small_;
      } else {
        large_.assign(n, value);
        data_ = large_.data();
      }
      for (size_t i = 0; i < n; ++i) data_[i] = value;
      size_ = n;
    }
    InFlight& operator[](size_t i) { return data_[i]; }
    InFlight* begin() { return data_; }
    InFlight* end() { return data_ + size_; }
    const InFlight* begin() const { return data_; }
    const InFlight* end() const { return data_ + size_; }

   private:
    static constexpr size_t kInline = 2;
    InFlight small_[kInline] = {};
    std::vector<InFlight> large_;
    InFlight* data_ = small_;
    size_t size_ = 0;
  };
  Flights flights_;  // current round
  int outstanding_ = 0;
  sl_result_t code_ = SL_OK;
  std::string error_;
};

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_OPERATION_H_
