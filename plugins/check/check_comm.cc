// check_comm.cc: see check_comm.h.
#include "plugins/check/check_comm.h"

#include <chrono>
#include <string>
#include <utility>

#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/op_format.h"

namespace syncline::plugin::check {
namespace {

using backend::SlSetError;
using Stage = PendingOp::Stage;

// Extra time granted to an inner op past its own deadline before we abort
// the inner communicator to get our buffers back.
constexpr int64_t kGraceMs = 5000;

// Publishes the worker's verdict on `p` and wakes its waiters.
void Resolve(const sl_backend_t* next, PendingOp& p, sl_result_t rc,
             const std::string& message, sl_request_t* inner) {
  bool free_now = false;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (rc == SL_OK) {
      p.stage = Stage::kPosted;
      free_now = p.freed;
      if (!free_now) p.inner = inner;
    } else {
      p.stage = Stage::kFailed;
      p.result = rc;
      p.message = message;
    }
  }
  p.cv.notify_all();
  if (free_now) next->request_free(inner);  // the backend keeps what it needs
}

// CheckRequest: what Post() returns for a collective. Until the worker hands
// the op over it reports "running"; then it forwards to the inner request.
class CheckRequest : public WrappedRequest {
 public:
  CheckRequest(const sl_backend_t* next, std::shared_ptr<PendingOp> pending)
      : WrappedRequest(next, nullptr), next_(next), pending_(std::move(pending)) {}

  ~CheckRequest() override {
    sl_request_t* inner = nullptr;
    {
      std::lock_guard<std::mutex> lock(pending_->mu);
      std::swap(inner, pending_->inner);
      pending_->freed = true;
    }
    if (inner != nullptr) next_->request_free(inner);
  }

  sl_result_t Test(int* done, sl_error_t* err) override {
    std::unique_lock<std::mutex> lock(pending_->mu);
    *done = 0;
    if (pending_->stage == Stage::kQueued) return SL_OK;
    if (pending_->stage == Stage::kFailed) {
      *done = 1;
      return SlSetError(err, pending_->result, "%s", pending_->message.c_str());
    }
    sl_request_t* inner = pending_->inner;
    lock.unlock();
    return next_->request_test(inner, done, err);
  }

  sl_result_t Wait(int64_t timeout_ms, sl_error_t* err) override {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(pending_->mu);
    auto handed_over = [&] { return pending_->stage != Stage::kQueued; };
    if (timeout_ms < 0) {
      pending_->cv.wait(lock, handed_over);
    } else if (!pending_->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                      handed_over)) {
      return SlSetError(err, SL_ERR_TIMEOUT,
                        "op #%llu is still being compared across ranks by the check "
                        "interposer after %lld ms",
                        static_cast<unsigned long long>(pending_->op.seq),
                        static_cast<long long>(timeout_ms));
    }
    if (pending_->stage == Stage::kFailed) {
      return SlSetError(err, pending_->result, "%s", pending_->message.c_str());
    }
    sl_request_t* inner = pending_->inner;
    lock.unlock();
    int64_t left = -1;
    if (timeout_ms >= 0) {
      const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
      left = timeout_ms > spent ? timeout_ms - spent : 0;
    }
    return next_->request_wait(inner, left, err);
  }

  // The comparison across ranks is host-side: wait for the handover on the
  // host (the op's own deadline bounds it), then let the stream wait.
  sl_result_t StreamWait(void* stream, sl_error_t* err) override {
    std::unique_lock<std::mutex> lock(pending_->mu);
    pending_->cv.wait(lock, [&] { return pending_->stage != Stage::kQueued; });
    if (pending_->stage == Stage::kFailed) {
      return SlSetError(err, pending_->result, "%s", pending_->message.c_str());
    }
    sl_request_t* inner = pending_->inner;
    lock.unlock();
    return next_->request_stream_wait(inner, stream, err);
  }

 private:
  const sl_backend_t* const next_;
  const std::shared_ptr<PendingOp> pending_;
};

}  // namespace

CheckComm::CheckComm(const sl_backend_t* next, sl_comm_t* inner,
                     const sl_comm_config_t& config, const CheckOptions& options)
    : WrappedComm(next, inner, config), options_(options) {
  worker_ = std::thread([this] { WorkerLoop(); });
}

CheckComm::~CheckComm() {
  if (worker_.joinable()) OnDestroy();
}

sl_result_t CheckComm::Post(const sl_op_t& op, std::unique_ptr<WrappedRequest>* request,
                            sl_error_t* err) {
  std::shared_ptr<PendingOp> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ != SL_OK) {
      return SlSetError(err, broken_code_, "the communicator is unusable since %s",
                        broken_message_.c_str());
    }
    if (IsCollective(op.kind)) {
      pending = std::make_shared<PendingOp>(op);
      queue_.push_back(pending);
    }
  }
  if (pending == nullptr) {
    std::lock_guard<std::mutex> lock(inner_post_mu_);
    return PostInner(op, request, err);
  }
  cv_.notify_one();
  *request = std::make_unique<CheckRequest>(next(), std::move(pending));
  return SL_OK;
}

void CheckComm::Stop(sl_result_t code, const std::string& why) {
  std::deque<std::shared_ptr<PendingOp>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ == SL_OK) {
      broken_code_ = code;
      broken_message_ = why;
    }
    dropped.swap(queue_);
  }
  for (auto& p : dropped) {
    Resolve(next(), *p, code,
            "op #" + std::to_string(p->op.seq) +
                " never ran: the communicator is unusable since " + why,
            nullptr);
  }
  drained_cv_.notify_all();
}

sl_result_t CheckComm::Abort(sl_error_t* err) {
  Stop(SL_ERR_ABORTED, "it was aborted");
  return next()->comm_abort(inner(), err);
}

void CheckComm::OnDestroy() {
  Stop(SL_ERR_ABORTED, "it was destroyed");
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void CheckComm::WorkerLoop() {
  while (true) {
    std::shared_ptr<PendingOp> pending;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      pending = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    Run(*pending);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
    drained_cv_.notify_all();
  }
}

sl_result_t CheckComm::SplitInner(int32_t color, int32_t key, const sl_store_t* store,
                                  uint64_t new_comm_id, sl_comm_t** child,
                                  sl_comm_config_t* child_config, sl_error_t* err) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    drained_cv_.wait(lock, [&] { return (queue_.empty() && !running_) || stopping_; });
    if (broken_code_ != SL_OK) {
      return SlSetError(err, broken_code_, "the communicator is unusable since %s",
                        broken_message_.c_str());
    }
  }
  std::lock_guard<std::mutex> lock(inner_post_mu_);
  return WrappedComm::SplitInner(color, key, store, new_comm_id, child, child_config, err);
}

void CheckComm::Run(PendingOp& pending) {
  const sl_op_t& op = pending.op;
  sl_result_t rc = SL_OK;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ != SL_OK) {
      rc = broken_code_;
      message = "the communicator is unusable since " + broken_message_;
    }
  }
  if (rc == SL_OK) {
    const Fingerprint mine = MakeFingerprint(op, rank(), options_.scan_non_finite);
    const int64_t deadline_ms = op.timeout_ms > 0 ? op.timeout_ms : timeout_ms();
    std::vector<Fingerprint> all;
    rc = Exchange(mine, op.seq, deadline_ms, &all, &message);
    if (rc == SL_OK) rc = CompareFingerprints(all, op.seq, &message);
    if (rc == SL_ERR_MISMATCH) {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_code_ == SL_OK) {
        broken_code_ = rc;
        broken_message_ = "an earlier desync: " + message;
      }
    }
  }
  sl_request_t* inner_request = nullptr;
  if (rc == SL_OK) {
    std::lock_guard<std::mutex> lock(inner_post_mu_);
    sl_error_t inner_err{};
    rc = next()->post(inner(), &op, &inner_request, &inner_err);
    if (rc != SL_OK) message = inner_err.message;
  }
  Resolve(next(), pending, rc, message, inner_request);
}

sl_result_t CheckComm::WaitToEnd(sl_request_t* request, int64_t timeout_ms,
                                 sl_error_t* err) {
  // The backend fails the op at its deadline; waiting a little longer only
  // covers a backend that misses it. Then abort, which the ABI says fails
  // every pending request and wakes its waiters.
  const int64_t wait_ms = timeout_ms > 0 ? timeout_ms + kGraceMs : -1;
  sl_result_t rc = next()->request_wait(request, wait_ms, err);
  if (rc == SL_ERR_TIMEOUT) {
    int done = 0;
    sl_error_t probe{};
    next()->request_test(request, &done, &probe);
    if (!done) {
      sl_error_t abort_err{};
      next()->comm_abort(inner(), &abort_err);
      next()->request_wait(request, -1, &probe);
    }
  }
  return rc;
}

sl_result_t CheckComm::Exchange(const Fingerprint& mine, uint64_t seq, int64_t timeout_ms,
                                std::vector<Fingerprint>* all, std::string* message) {
  all->assign(static_cast<size_t>(size()), Fingerprint{});
  sl_op_t x = sl_op_init(SL_OP_ALLGATHER);
  x.seq = kExchangeSeqBits | seq;
  x.send = sl_buffer_t{const_cast<Fingerprint*>(&mine),
                       sizeof(Fingerprint),
                       SL_U8,
                       SL_DEVICE_CPU,
                       0,
                       nullptr};
  x.recv = sl_buffer_t{
      all->data(), sizeof(Fingerprint) * all->size(), SL_U8, SL_DEVICE_CPU, 0, nullptr};
  x.timeout_ms = timeout_ms;
  sl_request_t* request = nullptr;
  sl_error_t inner_err{};
  sl_result_t rc;
  {
    std::lock_guard<std::mutex> lock(inner_post_mu_);
    rc = next()->post(inner(), &x, &request, &inner_err);
  }
  if (rc == SL_OK) {
    rc = WaitToEnd(request, timeout_ms, &inner_err);
    next()->request_free(request);
  }
  if (rc == SL_OK) return SL_OK;
  // The inner layer names the exchange by its internal sequence number;
  // say what it is instead.
  std::string inner_message = inner_err.message;
  const std::string internal = backend::SlOpName(x);  // "allgather internal#<seq>"
  const size_t at = inner_message.find(internal);
  if (at != std::string::npos) {
    inner_message.replace(at, internal.size(),
                          "fingerprint exchange for op #" + std::to_string(seq));
  }
  *message = "op #" + std::to_string(seq) +
             ": the check interposer could not compare this op across ranks (a rank did "
             "not reach this collective in time, issued another op, or failed): " +
             inner_message;
  return rc;
}

}  // namespace syncline::plugin::check
