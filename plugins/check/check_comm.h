// check_comm.h: one communicator of the check interposer.
//
// Before each collective, every rank contributes a fixed-size Fingerprint of
// the op to an allgather on the inner communicator, and compares them all.
// Only when every rank agrees is the user's op handed to the inner
// communicator; otherwise every rank fails the op with SL_ERR_MISMATCH and
// the same message naming who called what, within one round trip.
//
// Post() never blocks on peers, as the ABI requires: a collective is queued
// for this communicator's worker thread, which (in posting order) exchanges
// its fingerprint, compares, and posts it to the inner communicator. The
// request returned by Post() (a CheckRequest) reports "running" until the
// worker has handed the op over, then forwards to the inner request. Send
// and recv are not fingerprinted; they are posted at once.
//
// The exchange's own allgather uses sequence numbers with bit 63 and bit 31
// set (seq | kExchangeSeqBits). Backends use a collective's seq only to tag
// its messages (Gloo: the low 32 bits), so the exchange's tags never
// collide with the user's ops, and every rank computes the same ones.
//
// After a mismatch the communicator stays desynchronized (ranks disagree
// about what comes next), so every later op fails at once with the original
// message.
//
// Threading: Post() from one thread at a time (the core serializes posts);
// Abort(), and CheckRequest's Test/Wait, from any thread. The worker thread
// is owned by the CheckComm: started by the constructor, joined by
// OnDestroy() (or the destructor). Inner posts come from both the posting
// thread (send/recv) and the worker (collectives), so they are serialized
// by inner_post_mu_, as the inner layer expects one poster at a time.
#ifndef SYNCLINE_PLUGINS_CHECK_CHECK_COMM_H_
#define SYNCLINE_PLUGINS_CHECK_CHECK_COMM_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "plugins/check/fingerprint.h"
#include "syncline/plugin_sdk/interposer.h"

namespace syncline::plugin::check {

constexpr uint64_t kExchangeSeqBits = SL_SEQ_INTERPOSER_BIT | SL_SEQ_CHECK_BIT;

struct CheckOptions {
  // Scan floating-point inputs for NaN/Inf (SYNCLINE_CHECK_NAN=1).
  bool scan_non_finite = false;
};

// PendingOp
//
// A collective between Post() and its hand-off to the inner communicator,
// shared by the worker (which resolves it) and the CheckRequest (which
// waits on it).
struct PendingOp {
  enum class Stage { kQueued, kPosted, kFailed };

  explicit PendingOp(const sl_op_t& o) : op(o) {}

  const sl_op_t op;
  std::mutex mu;
  std::condition_variable cv;
  Stage stage ABSL_GUARDED_BY(mu) = Stage::kQueued;
  sl_request_t* inner ABSL_GUARDED_BY(mu) = nullptr;  // set when kPosted
  sl_result_t result ABSL_GUARDED_BY(mu) = SL_OK;     // set when kFailed
  std::string message ABSL_GUARDED_BY(mu);
  // The caller freed its request before the hand-off; the worker frees the
  // inner request as soon as it exists.
  bool freed ABSL_GUARDED_BY(mu) = false;
};

class CheckComm : public WrappedComm {
 public:
  CheckComm(const sl_backend_t* next, sl_comm_t* inner, const sl_comm_config_t& config,
            const CheckOptions& options);
  ~CheckComm() override;

  // Collectives: queued for the worker (never blocks). Send/recv: posted.
  sl_result_t Post(const sl_op_t& op, std::unique_ptr<WrappedRequest>* request,
                   sl_error_t* err) override;
  // Fails queued collectives with SL_ERR_ABORTED, then aborts the inner
  // communicator (which also wakes a worker waiting in an exchange).
  sl_result_t Abort(sl_error_t* err) override;
  // Fails what is still queued and joins the worker. A worker in the middle
  // of an exchange finishes it first (bounded by the op's deadline).
  void OnDestroy() override;
  // Waits until the worker has handed every queued collective to the inner
  // communicator (the core posts nothing during a split), then splits with
  // the inner posts locked out, so the split's inner ops come after the
  // same ops on every rank. A desynchronized communicator does not split.
  sl_result_t SplitInner(int32_t color, int32_t key, const sl_store_t* store,
                         uint64_t new_comm_id, sl_comm_t** child,
                         sl_comm_config_t* child_config, sl_error_t* err) override;

 private:
  void WorkerLoop();
  // Checks one collective and hands it over (or fails it).
  void Run(PendingOp& pending);
  // Allgathers `mine` over the inner communicator into `all`. On failure
  // returns the code and sets `message` (naming `seq`).
  sl_result_t Exchange(const Fingerprint& mine, uint64_t seq, int64_t timeout_ms,
                       std::vector<Fingerprint>* all, std::string* message);
  // Waits for an inner request whose buffers we own: it must end before we
  // return, whatever happens.
  sl_result_t WaitToEnd(sl_request_t* request, int64_t timeout_ms, sl_error_t* err);
  // Marks the communicator unusable "since <why>" (e.g. "it was aborted")
  // and fails every queued collective with `code`.
  void Stop(sl_result_t code, const std::string& why);

  const CheckOptions options_;
  std::mutex inner_post_mu_;  // one inner poster at a time

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<PendingOp>> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // the worker holds a popped op
  std::condition_variable drained_cv_;        // queue_ empty and !running_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The first desync or abort; SL_OK while usable.
  sl_result_t broken_code_ ABSL_GUARDED_BY(mu_) = SL_OK;
  std::string broken_message_ ABSL_GUARDED_BY(mu_);

  std::thread worker_;  // started last in the constructor
};

}  // namespace syncline::plugin::check

#endif  // SYNCLINE_PLUGINS_CHECK_CHECK_COMM_H_
