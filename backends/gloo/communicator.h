// communicator.h: one Gloo communicator behind an sl_comm_t.
//
// Create() connects a full mesh of Gloo pairs through the core's store (a
// TCP device on loopback by default; see mesh.h) and starts two threads
// that this object owns and joins:
//   - the worker runs collectives one at a time, in sequence order, so every
//     rank executes them in the order they were posted;
//   - the p2p thread waits for sends and receives to complete. They are
//     started (posted to Gloo) by Post() itself, so point-to-point traffic
//     never waits behind a collective, as the ABI promises.
//
// Failure policy: the first op that fails (timeout, dead peer) breaks the
// communicator. Its connections are closed so that peers stop waiting on
// this rank and fail at once instead of at their own deadlines, and every
// later op fails immediately with a message naming the op that broke it. A
// half-finished collective leaves peers in unknown states, so continuing
// would risk silently wrong results.
//
// Abort() fails every queued and running op with SL_ERR_ABORTED and wakes
// their waiters at once. A collective already inside Gloo cannot be
// interrupted: it ends at its own deadline (sooner, since the peers' links
// are closed), and the destructor joins the worker, so destruction is
// bounded by the longest op timeout. Until then Gloo may still touch that
// op's buffers, so they must stay valid until comm_destroy returns.
//
// Thread safety: Post() from one thread at a time (the core serializes it);
// Abort() and the destructor's callers from any thread.
#ifndef SYNCLINE_BACKENDS_GLOO_COMMUNICATOR_H_
#define SYNCLINE_BACKENDS_GLOO_COMMUNICATOR_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backends/gloo/work.h"
#include "syncline/plugin_abi.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace syncline::gloo_backend {

class Communicator {
 public:
  // Create()
  //
  // Collective over config.size ranks; blocks until all have connected or
  // config.timeout_ms has passed. On failure fills `err` (naming the rank,
  // the time waited and the store's or Gloo's reason) and returns its code.
  static sl_result_t Create(const sl_comm_config_t& config,
                            std::unique_ptr<Communicator>* comm, sl_error_t* err);

  // Fails ops that have not started, interrupts p2p waits, and joins both
  // threads (waiting for a running collective to end, bounded by its
  // deadline).
  ~Communicator();

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Post()
  //
  // Validates `op` and queues it (or, for SEND/RECV, starts it). Never
  // blocks on peers. Invalid ops, and any op after a failure or an abort,
  // fail at once with the reason in `err`.
  sl_result_t Post(const sl_op_t& op, std::shared_ptr<Request>* request, sl_error_t* err);

  // Abort(): see the file comment. Idempotent.
  void Abort();

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  Communicator(int rank, int size, std::shared_ptr<::gloo::Context> context,
               std::shared_ptr<::gloo::transport::Device> device,
               std::vector<std::pair<std::string, int>> peer_addresses);

  // Rewrites Gloo's "[127.0.0.1]:4242" peer addresses in `text` as
  // "rank 2 ([127.0.0.1]:4242)", so errors say which rank failed.
  std::string NamePeers(std::string text) const;

  void WorkerLoop();
  void P2pLoop();
  // Runs one request and completes it.
  void RunCollectiveRequest(Request& request);
  void WaitPointToPoint(Request& request);
  // Completes `request` with the error in flight (call inside a catch
  // block), breaks the communicator and closes its connections.
  void FailWithCurrentException(Request& request);
  void Fail(Request& request, sl_result_t code, const std::string& message);
  // Non-OK (and the message) if the communicator is broken or aborted.
  sl_result_t CheckUsable(const Request& request, std::string* message);
  // "rank 1/4", for messages.
  std::string Where() const;

  const int rank_;
  const int size_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::Context> context_;
  // (Gloo's text for a peer's address, that peer's rank); immutable.
  const std::vector<std::pair<std::string, int>> peer_addresses_;

  std::mutex mu_;
  // One per thread, so that posting a collective wakes only the worker, and
  // only when it may be asleep (its queue was empty).
  std::condition_variable worker_cv_;
  std::condition_variable p2p_cv_;
  std::deque<std::shared_ptr<Request>> collectives_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Request>> p2p_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Request> running_collective_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Request> running_p2p_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  // The first failure; SL_OK while healthy.
  sl_result_t broken_code_ ABSL_GUARDED_BY(mu_) = SL_OK;
  std::string broken_message_ ABSL_GUARDED_BY(mu_);

  // Started last in Create(), joined first in the destructor.
  std::thread worker_;
  std::thread p2p_thread_;
};

}  // namespace syncline::gloo_backend

#endif  // SYNCLINE_BACKENDS_GLOO_COMMUNICATOR_H_
