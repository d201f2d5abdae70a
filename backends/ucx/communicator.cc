#include "backends/ucx/communicator.h"

#include "backends/common/socket_iface.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <utility>

#include "backends/common/error.h"
#include "backends/ucx/algorithms/algorithms.h"
#include "backends/ucx/tag.h"

namespace syncline::ucx_backend {
namespace {

using backend::SlSetError;

// Bootstrap deadline when the core passes none.
constexpr std::chrono::minutes kDefaultBootstrapTimeout(5);

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// pidfd_open(2) through syscall(): glibc 2.36 has no wrapper everywhere.
int PidfdOpen(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

Communicator::Communicator(const sl_comm_config_t& config, const Options& options)
    : rank_(config.rank),
      size_(config.size),
      comm_id_(config.comm_id),
      comm_bits_(CommTagBits(config.comm_id)),
      options_(options) {}

sl_result_t Communicator::Create(const sl_comm_config_t& config,
                                 std::unique_ptr<Communicator>* comm, sl_error_t* err) {
  if (config.size < 1 || config.size > kMaxRanks || config.rank < 0 ||
      config.rank >= config.size) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                      "ucx comm_create: rank %d is not in a group of %d (at most %d ranks)",
                      config.rank, config.size, kMaxRanks);
  }
  if (config.device != SL_DEVICE_CPU) {
    return SlSetError(err, SL_ERR_UNSUPPORTED,
                      "ucx comm_create: the ucx backend runs on CPU buffers only; for "
                      "CUDA use SYNCLINE_BACKEND=nccl");
  }
  if (config.store == nullptr) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                      "ucx comm_create: no store to bootstrap with");
  }
  Options options;
  std::string error;
  if (!ParseOptions(config.options, &options, &error)) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "ucx comm_create: backend options: %s",
                      error.c_str());
  }
  const auto start = Clock::now();
  std::unique_ptr<Communicator> created(new Communicator(config, options));
  const sl_result_t code = created->Bootstrap(config, &error);
  if (code != SL_OK) {
    const double timeout_s =
        config.timeout_ms > 0 ? config.timeout_ms / 1000.0
                              : std::chrono::duration<double>(kDefaultBootstrapTimeout).count();
    return SlSetError(err, code,
                      "ucx comm_create (comm id %" PRIu64
                      ") failed on rank %d/%d after %.1f s (timeout %.1f s): %s",
                      config.comm_id, config.rank, config.size, SecondsSince(start),
                      timeout_s, error.c_str());
  }
  Communicator* self = created.get();
  created->progress_thread_ = std::thread([self] { self->ProgressLoop(); });
  *comm = std::move(created);
  return SL_OK;
}

sl_result_t Communicator::Bootstrap(const sl_comm_config_t& config, std::string* error) {
  const auto deadline =
      Clock::now() + (config.timeout_ms > 0
                          ? std::chrono::milliseconds(config.timeout_ms)
                          : std::chrono::duration_cast<std::chrono::milliseconds>(
                                kDefaultBootstrapTimeout));
  // SYNCLINE_SOCKET_IFNAME selects UCX's network devices too (unless
  // UCX_NET_DEVICES says otherwise), by the same rules as the TCP backends:
  // in a multi-host job, a loopback choice is an error, not a silent bind.
  std::string net_devices;
  const char* ifname = std::getenv("SYNCLINE_SOCKET_IFNAME");
  const char* ucx_devices = std::getenv("UCX_NET_DEVICES");
  if (ifname != nullptr && *ifname != '\0' && (ucx_devices == nullptr || *ucx_devices == '\0')) {
    backend::SocketChoice choice;
    if (!backend::ChooseSocketAddressFromEnv(nullptr, config.size, &choice, error)) {
      return SL_ERR_INVALID_ARGUMENT;
    }
    net_devices = choice.iface;
  }
  ucs_status_t status = context_.Init(net_devices);
  if (status != UCS_OK) {
    *error = std::string("ucp_init failed: ") + ucs_status_string(status) +
             " (check UCX_TLS, UCX_NET_DEVICES and other UCX_* variables)";
    return SL_ERR_UNAVAILABLE;
  }
  status = worker_.Init(context_.get());
  if (status != UCS_OK) {
    *error = std::string("creating the UCP worker failed: ") + ucs_status_string(status);
    return SL_ERR_UNAVAILABLE;
  }
  const PeerInfo mine = LocalPeerInfo(worker_.address());
  sl_result_t code =
      ExchangePeerInfo(*config.store, rank_, size_, mine, deadline, &peers_, error);
  if (code != SL_OK) return code;

  std::lock_guard<std::mutex> driver(driver_mu_);
  endpoints_.Reset(worker_.get(), size_);
  eps_.assign(size_, nullptr);
  pidfds_.assign(size_, -1);
  dead_.assign(size_, "");
  error_args_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const bool same_machine = peers_[r].machine == mine.machine;
    const ucp_err_handling_mode_t mode =
        ChooseErrorMode(options_.peer_error_mode, same_machine);
    error_args_[r] = {this, r};
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(peers_[r].address.data());
    params.err_mode = mode;
    params.err_handler.cb = &Communicator::OnEndpointError;
    params.err_handler.arg = &error_args_[r];
    status = ucp_ep_create(worker_.get(), &params, &endpoints_[r]);
    if (status != UCS_OK) {
      *error = "cannot connect to rank " + std::to_string(r) + ": " +
               ucs_status_string(status) + ". " +
               ReachabilityHint(mine, peers_[r], r, mode);
      return SL_ERR_UNAVAILABLE;
    }
    eps_[r] = endpoints_[r];
    // Same-host peers are watched by pidfd (see bootstrap.h).
    if (same_machine) pidfds_[r] = PidfdOpen(peers_[r].pid);
  }
  wire_ = Wire{worker_.get(), &eps_, comm_bits_, rank_};
  code = Hello(deadline, error);
  if (code == SL_OK && size_ > 1) PostNoticeRecv();
  return code;
}

// One byte to and from every peer, before Create() returns: proves that
// each endpoint's transport actually carries data (an address can resolve
// yet lead nowhere, e.g. tcp to an unroutable interface).
sl_result_t Communicator::Hello(Clock::time_point deadline, std::string* error) {
  if (size_ == 1) return SL_OK;
  ScheduleBuilder b("hello", SL_U8, SL_SUM);
  uint8_t* bytes = b.AllocScratch(size_ + 1);
  b.NewRound();
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    b.Send(r, bytes + size_, 1, 0);
    b.Recv(r, bytes + r, 1, 0);
  }
  sl_op_t op{};
  op.kind = SL_OP_BARRIER;
  auto request = std::make_shared<Request>(this, op, size_);
  Operation hello(request, b.Finish(), /*p2p=*/false, /*seq=*/0);
  while (!hello.Advance(wire_)) {
    if (ucp_worker_progress(worker_.get()) != 0) continue;
    CheckPeers(/*force=*/false);
    std::string dead;
    for (int r = 0; r < size_; ++r) {
      if (!dead_[r].empty()) dead += " rank " + std::to_string(r) + ": " + dead_[r] + ";";
    }
    if (!dead.empty() || Clock::now() >= deadline) {
      const std::string waiting = hello.Waiting();
      hello.Cancel(worker_.get());
      *error = (dead.empty() ? std::string("no hello over UCX within the timeout from ")
                             : "peers died during the hello:" + dead + " still waiting on ") +
               waiting + ". Transports to rank " +
               std::to_string((rank_ + 1) % size_) + ": " +
               EndpointTransports(eps_[(rank_ + 1) % size_]) + ". " +
               ReachabilityHint(peers_[rank_], peers_[(rank_ + 1) % size_],
                                (rank_ + 1) % size_,
                                ChooseErrorMode(options_.peer_error_mode, true));
      endpoints_.Close();  // completes the cancelled requests
      return dead.empty() ? SL_ERR_TIMEOUT : SL_ERR_PEER;
    }
    if (ucp_worker_arm(worker_.get()) == UCS_OK) {
      pollfd fd{worker_.event_fd(), POLLIN, 0};
      poll(&fd, 1, 1);
    }
  }
  if (hello.failed()) {
    *error = "the hello exchange failed: " + hello.error() + ". " +
             ReachabilityHint(peers_[rank_], peers_[(rank_ + 1) % size_],
                              (rank_ + 1) % size_, UCP_ERR_HANDLING_MODE_PEER);
    endpoints_.Close();
    return hello.code();
  }
  return SL_OK;
}

Communicator::~Communicator() {
  stopping_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    thread_cv_.notify_all();
  }
  if (worker_.get() != nullptr) ucp_worker_signal(worker_.get());
  if (progress_thread_.joinable()) progress_thread_.join();
  std::vector<std::shared_ptr<Request>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(pending_);
  }
  for (auto& request : pending) {
    request->Complete(SL_ERR_ABORTED, "ucx " + request->Describe() + " on " + Where() +
                                          ": the communicator was destroyed first");
  }
  std::lock_guard<std::mutex> driver(driver_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& op : incoming_) collectives_.push_back(std::move(op));
    incoming_.clear();
  }
  for (auto* list : {&collectives_}) {
    for (auto& op : *list) {
      op->Cancel(worker_.get());
      zombies_.push_back(std::move(op));
    }
  }
  for (auto& op : p2p_) {
    op->Cancel(worker_.get());
    zombies_.push_back(std::move(op));
  }
  collectives_.clear();
  p2p_.clear();
  if (aborted_.load() && size_ > 1) NoticeAbort();
  if (notice_request_ != nullptr) ucp_request_cancel(worker_.get(), notice_request_);
  if (worker_.get() != nullptr) {
    for (int i = 0; i < 1000 && ucp_worker_progress(worker_.get()) != 0; ++i) {
    }
    // Deliver what was sent locally-complete but may still sit in a
    // transport queue (tcp): peers may still need this rank's last
    // messages, e.g. the final round of a barrier.
    Flush(Clock::now() + std::chrono::seconds(2));
  }
  endpoints_.Close();  // completes every send still queued (with an error)
  for (int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
  // worker_, then context_, then the zombie Operations go with the members.
}

std::string Communicator::Where() const {
  return "rank " + std::to_string(rank_) + "/" + std::to_string(size_);
}

sl_result_t Communicator::Post(const sl_op_t& op, std::shared_ptr<Request>* request,
                               sl_error_t* err) {
  std::string message;
  sl_result_t code = ValidateOp(op, rank_, size_, &message);
  if (code != SL_OK) {
    return SlSetError(err, code, "ucx %s on %s", message.c_str(), Where().c_str());
  }
  auto req = std::make_shared<Request>(this, op, size_);
  const bool p2p = op.kind == SL_OP_SEND || op.kind == SL_OP_RECV;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.load() || stopping_.load()) {
      return SlSetError(err, SL_ERR_ABORTED, "ucx %s on %s: the communicator was aborted",
                        req->Describe().c_str(), Where().c_str());
    }
    if (!p2p && broken_code_ != SL_OK) {
      return SlSetError(err, broken_code_,
                        "ucx %s not run on %s: the communicator is unusable after an "
                        "earlier failure: %s",
                        req->Describe().c_str(), Where().c_str(), broken_message_.c_str());
    }
  }
  AlgoArgs args{&op, rank_, size_, &options_};
  auto operation = std::make_unique<Operation>(req, SelectSchedule(args), p2p,
                                               p2p ? 0 : TagSeq(++collective_seq_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(std::move(operation));
    pending_.push_back(req);
    unfinished_.fetch_add(1);
    has_incoming_.store(true);
    if (thread_idle_) thread_cv_.notify_one();
  }
  if (driver_blocked_.load()) ucp_worker_signal(worker_.get());
  // One pass now, so the op's first messages leave before anyone waits.
  TryProgress();
  *request = std::move(req);
  backend::SlClearError(err);
  return SL_OK;
}

void Communicator::Abort() {
  if (aborted_.exchange(true)) return;
  std::vector<std::shared_ptr<Request>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(pending_);
  }
  for (auto& request : pending) {
    request->Complete(SL_ERR_ABORTED, "ucx " + request->Describe() + " on " + Where() +
                                          ": the communicator was aborted");
  }
  // Tell the peers now if nobody is driving; otherwise the driver does it
  // on its next pass. Wake a driver sleeping on the event fd.
  if (driver_mu_.try_lock()) {
    NoticeAbort();
    driver_mu_.unlock();
  }
  ucp_worker_signal(worker_.get());
  std::lock_guard<std::mutex> lock(mu_);
  thread_cv_.notify_all();
  cv_.notify_all();
}

void Communicator::OnEndpointError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Runs inside ucp_worker_progress, on the driver.
  auto* error_arg = static_cast<ErrorArg*>(arg);
  error_arg->comm->MarkDead(error_arg->rank,
                            std::string("UCX reported the endpoint failed: ") +
                                ucs_status_string(status));
}

}  // namespace syncline::ucx_backend
