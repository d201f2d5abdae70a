#include "backends/gloo/communicator.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backends/common/socket_iface.h"
#include "backends/gloo/ops.h"
#include "backends/gloo/mesh.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "syncline/plugin_sdk/error.h"

namespace syncline::gloo_backend {
namespace {

using backend::SlSetError;

// Bootstrap deadline when the core passes none.
constexpr std::chrono::minutes kDefaultBootstrapTimeout(5);

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


// The address Gloo listens on, by the rules of backends/common/socket_iface.h
// (SYNCLINE_SOCKET_IFNAME or GLOO_SOCKET_IFNAME with NCCL's syntax; else
// loopback for a single-host job and the route to the master otherwise; never
// loopback in a multi-host job).
std::shared_ptr<::gloo::transport::Device> MakeDevice(int world_size, std::string* where) {
  backend::SocketChoice choice;
  std::string error;
  if (!backend::ChooseSocketAddressFromEnv("GLOO_SOCKET_IFNAME", world_size, &choice,
                                           &error)) {
    throw std::invalid_argument(error);
  }
  ::gloo::transport::tcp::attr attr;
  attr.hostname = choice.address;
  *where = choice.address + " (" + choice.reason + ")";
  return ::gloo::transport::tcp::CreateDevice(attr);
}

// Gloo writes to its sockets with writev(), which raises SIGPIPE when the
// peer has gone. Left at its default action, that signal would kill this
// process instead of letting the op fail with an error naming the peer, so
// a process that has not chosen a SIGPIPE handler gets it ignored. A handler
// the application installed is left alone.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current;
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      !(current.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

// Gloo prefixes its messages with "[file:line] "; drop that for readers.
std::string StripGlooLocation(const char* what) {
  std::string text(what);
  if (!text.empty() && text[0] == '[') {
    const size_t end = text.find("] ");
    if (end != std::string::npos) text.erase(0, end + 2);
  }
  return text;
}

bool LooksLikeTimeout(const std::string& text) {
  return text.find("imed out") != std::string::npos ||
         text.find("timeout") != std::string::npos;
}

// Translates the exception in flight into a code and a reason.
sl_result_t ClassifyCurrentException(std::string* reason) {
  try {
    throw;
  } catch (const StoreError& e) {
    *reason = e.what();
    return e.code();
  } catch (const ::gloo::IoException& e) {
    *reason = StripGlooLocation(e.what());
    if (LooksLikeTimeout(*reason)) {
      *reason += " (a peer is missing, stalled, or issued a different op)";
      return SL_ERR_TIMEOUT;
    }
    *reason = "connection to a peer failed: " + *reason +
              " (a peer died, or closed the communicator after an error)";
    return SL_ERR_PEER;
  } catch (const ::gloo::EnforceNotMet& e) {
    *reason = "gloo internal check failed: " + StripGlooLocation(e.what());
    return SL_ERR_INTERNAL;
  } catch (const std::invalid_argument& e) {
    *reason = e.what();  // configuration, e.g. no usable network interface
    return SL_ERR_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    *reason = "out of memory";
    return SL_ERR_UNAVAILABLE;
  } catch (const std::exception& e) {
    *reason = StripGlooLocation(e.what());
    return SL_ERR_INTERNAL;
  } catch (...) {
    *reason = "unknown exception";
    return SL_ERR_INTERNAL;
  }
}

}  // namespace

std::string Communicator::NamePeers(std::string text) const {
  for (const auto& [address, peer] : peer_addresses_) {
    const size_t at = text.find(address);
    if (at != std::string::npos) {
      text.replace(at, address.size(),
                   "rank " + std::to_string(peer) + " (" + address + ")");
    }
  }
  return text;
}

sl_result_t Communicator::Create(const sl_comm_config_t& config,
                                 std::unique_ptr<Communicator>* comm, sl_error_t* err) {
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                      "gloo comm_create: rank %d is not in a group of %d", config.rank,
                      config.size);
  }
  if (config.device != SL_DEVICE_CPU) {
    return SlSetError(err, SL_ERR_UNSUPPORTED,
                      "gloo comm_create: the gloo backend runs on CPU only; "
                      "for CUDA use SYNCLINE_BACKEND=nccl");
  }
  if (config.store == nullptr) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                      "gloo comm_create: no store to bootstrap with");
  }
  const auto start = Clock::now();
  const std::chrono::milliseconds timeout =
      config.timeout_ms > 0 ? std::chrono::milliseconds(config.timeout_ms)
                            : std::chrono::milliseconds(kDefaultBootstrapTimeout);
  std::string where = "?";
  IgnoreSigpipeUnlessHandled();
  try {
    auto device = MakeDevice(config.size, &where);
    auto context = std::make_shared<MeshContext>(config.rank, config.size);
    context->setTimeout(timeout);
    auto peers = context->ConnectMesh(*config.store, device, start + timeout);
    comm->reset(new Communicator(config.rank, config.size, std::move(context),
                                 std::move(device), std::move(peers)));
    return SL_OK;
  } catch (...) {
    std::string reason;
    const sl_result_t code = ClassifyCurrentException(&reason);
    return SlSetError(err, code,
                      "gloo comm_create (comm id %" PRIu64
                      ") failed on rank %d/%d after %.1f s (timeout %.1f s, "
                      "listening on %s): %s",
                      config.comm_id, config.rank, config.size, SecondsSince(start),
                      timeout.count() / 1000.0, where.c_str(), reason.c_str());
  }
}

Communicator::Communicator(int rank, int size, std::shared_ptr<::gloo::Context> context,
                           std::shared_ptr<::gloo::transport::Device> device,
                           std::vector<std::pair<std::string, int>> peer_addresses)
    : rank_(rank),
      size_(size),
      device_(std::move(device)),
      context_(std::move(context)),
      peer_addresses_(std::move(peer_addresses)) {
  worker_ = std::thread([this] { WorkerLoop(); });
  p2p_thread_ = std::thread([this] { P2pLoop(); });
}

Communicator::~Communicator() {
  std::vector<std::shared_ptr<Request>> unstarted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    unstarted.assign(collectives_.begin(), collectives_.end());
    unstarted.insert(unstarted.end(), p2p_.begin(), p2p_.end());
    collectives_.clear();
    p2p_.clear();
    if (running_p2p_ != nullptr) {
      running_p2p_->buffer()->abortWaitSend();
      running_p2p_->buffer()->abortWaitRecv();
    }
  }
  worker_cv_.notify_all();
  p2p_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (p2p_thread_.joinable()) p2p_thread_.join();
  // Closing the pairs first guarantees that no late message lands in the
  // buffer of a receive that is reported below as never run.
  context_.reset();
  device_.reset();
  for (auto& request : unstarted) {
    request->Complete(SL_ERR_ABORTED,
                      "gloo " + request->Describe() + " on " + Where() +
                          ": the communicator was destroyed before it ran");
  }
}

std::string Communicator::Where() const {
  return "rank " + std::to_string(rank_) + "/" + std::to_string(size_);
}

sl_result_t Communicator::CheckUsable(const Request& request, std::string* message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_ || stopping_) {
    *message = "gloo " + request.Describe() + " on " + Where() +
               ": the communicator was aborted";
    return SL_ERR_ABORTED;
  }
  if (broken_code_ != SL_OK) {
    *message =
        "gloo " + request.Describe() + " not run on " + Where() +
        ": the communicator is unusable after an earlier failure: " + broken_message_;
    return broken_code_;
  }
  return SL_OK;
}

sl_result_t Communicator::Post(const sl_op_t& op, std::shared_ptr<Request>* request,
                               sl_error_t* err) {
  std::string message;
  sl_result_t code = ValidateOp(op, rank_, size_, &message);
  if (code != SL_OK) return SlSetError(err, code, "gloo %s", message.c_str());
  auto req = std::make_shared<Request>(op);
  code = CheckUsable(*req, &message);
  if (code != SL_OK) return SlSetError(err, code, "%s", message.c_str());

  if (op.kind == SL_OP_SEND || op.kind == SL_OP_RECV) {
    req->clock().Start(Clock::now());  // Gloo starts it now, behind nothing
    try {
      auto buffer = StartPointToPoint(context_, op);
      if (buffer == nullptr) {
        req->Complete(SL_OK, "");
      } else {
        req->set_buffer(std::move(buffer));
        std::lock_guard<std::mutex> lock(mu_);
        // An Abort() that ran since CheckUsable() has already emptied the
        // queue; don't leave this one waiting until its deadline.
        if (aborted_) {
          req->buffer()->abortWaitSend();
          req->buffer()->abortWaitRecv();
        }
        p2p_.push_back(req);
      }
      p2p_cv_.notify_one();
    } catch (...) {
      FailWithCurrentException(*req);
      int done = 0;
      return req->Test(&done, err);
    }
  } else {
    bool was_empty;
    {
      std::lock_guard<std::mutex> lock(mu_);
      was_empty = collectives_.empty();
      collectives_.push_back(req);
    }
    // A worker with ops still queued does not sleep: waking it on every post
    // only costs both threads a context switch.
    if (was_empty) worker_cv_.notify_one();
  }
  *request = std::move(req);
  backend::SlClearError(err);
  return SL_OK;
}

void Communicator::Abort() {
  std::vector<std::shared_ptr<Request>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    aborted_ = true;
    pending.assign(collectives_.begin(), collectives_.end());
    pending.insert(pending.end(), p2p_.begin(), p2p_.end());
    collectives_.clear();
    p2p_.clear();
    if (running_collective_ != nullptr) pending.push_back(running_collective_);
    if (running_p2p_ != nullptr) {
      pending.push_back(running_p2p_);
      running_p2p_->buffer()->abortWaitSend();
      running_p2p_->buffer()->abortWaitRecv();
    }
  }
  worker_cv_.notify_all();
  p2p_cv_.notify_all();
  // Close the links before reporting: peers blocked on this rank fail at
  // once instead of at their deadlines, and no message can land in the
  // buffer of a receive reported as aborted. A collective running here
  // still ends at its own deadline.
  context_->closeConnections();
  for (auto& request : pending) {
    request->Complete(SL_ERR_ABORTED, "gloo " + request->Describe() + " on " + Where() +
                                          ": the communicator was aborted");
  }
}

void Communicator::WorkerLoop() {
  for (;;) {
    std::shared_ptr<Request> request;
    {
      std::unique_lock<std::mutex> lock(mu_);
      worker_cv_.wait(lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || !collectives_.empty();
      });
      if (collectives_.empty()) return;  // stopping
      request = std::move(collectives_.front());
      collectives_.pop_front();
      running_collective_ = request;
    }
    RunCollectiveRequest(*request);
    std::lock_guard<std::mutex> lock(mu_);
    running_collective_.reset();
  }
}

void Communicator::RunCollectiveRequest(Request& request) {
  std::string message;
  const sl_result_t code = CheckUsable(request, &message);
  if (code != SL_OK) {
    request.Complete(code, message);
    return;
  }
  // Its turn has come: the timeout counts from here, not from posting.
  request.clock().Start(Clock::now());
  try {
    RunCollective(context_, request.op(), request.clock().Remaining());
    request.Complete(SL_OK, "");
  } catch (...) {
    FailWithCurrentException(request);
  }
}

void Communicator::P2pLoop() {
  for (;;) {
    std::shared_ptr<Request> request;
    {
      std::unique_lock<std::mutex> lock(mu_);
      p2p_cv_.wait(lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || !p2p_.empty();
      });
      if (p2p_.empty()) return;  // stopping
      request = std::move(p2p_.front());
      p2p_.pop_front();
      running_p2p_ = request;
    }
    WaitPointToPoint(*request);
    std::lock_guard<std::mutex> lock(mu_);
    running_p2p_.reset();
  }
}

void Communicator::WaitPointToPoint(Request& request) {
  // Requests are waited for in posting order; one that completes early is
  // reported when those before it are done. Each still fails by its own
  // deadline, so this delays reporting but never hangs.
  try {
    ::gloo::transport::UnboundBuffer* buffer = request.buffer();
    const bool completed = request.op().kind == SL_OP_SEND
                               ? buffer->waitSend(request.clock().Remaining())
                               : buffer->waitRecv(request.clock().Remaining());
    if (completed) {
      request.Complete(SL_OK, "");
    } else {
      request.Complete(SL_ERR_ABORTED, "gloo " + request.Describe() + " on " + Where() +
                                           ": the communicator was aborted");
    }
  } catch (...) {
    FailWithCurrentException(request);
  }
}

void Communicator::FailWithCurrentException(Request& request) {
  std::string reason;
  const sl_result_t code = ClassifyCurrentException(&reason);
  char timeout[48];
  std::snprintf(timeout, sizeof(timeout), " (op timeout %" PRId64 " ms): ",
                request.op().timeout_ms);
  Fail(request, code,
       "gloo " + request.Describe() +
           (code == SL_ERR_TIMEOUT ? " timed out on " : " failed on ") + Where() +
           " after " + request.clock().Running() + timeout + NamePeers(reason));
}

void Communicator::Fail(Request& request, sl_result_t code, const std::string& message) {
  bool first = false;
  bool aborted = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted = aborted_;
    if (broken_code_ == SL_OK && !aborted_) {
      broken_code_ = code;
      broken_message_ = message;
      first = true;
    }
  }
  if (aborted) {
    // Abort() closed the links under a running op, which then fails in
    // whatever way Gloo notices (seen: "epoll_ctl: Bad file descriptor" when
    // the abort lands as the op starts). The cause is the abort; say so, as
    // Abort() itself does for the ops it completes.
    request.Complete(SL_ERR_ABORTED, "gloo " + request.Describe() + " on " + Where() +
                                         ": the communicator was aborted (" + message + ")");
    return;
  }
  if (first) context_->closeConnections();
  request.Complete(code, message);
}

}  // namespace syncline::gloo_backend
