#include "backends/ucx/transport.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "backends/common/socket_iface.h"
#include "backends/ucx/communicator.h"

namespace syncline::ucx_backend {
namespace {

// How often a busy driver looks at same-host peers' pidfds.
constexpr std::chrono::milliseconds kPeerCheckInterval(10);

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

Transport::Transport(int rank, int size, const Options& options, const sl_store_t* store)
    : rank_(rank), size_(size), options_(options), store_(store), requested_(size, 0) {}

sl_result_t Transport::Create(const sl_comm_config_t& config, const Options& options,
                              Clock::time_point deadline,
                              std::shared_ptr<Transport>* transport, std::string* error) {
  std::shared_ptr<Transport> t(
      new Transport(config.rank, config.size, options, config.store));
  // SYNCLINE_SOCKET_IFNAME selects UCX's network devices too (unless
  // UCX_NET_DEVICES says otherwise), by the same rules as the TCP backends:
  // in a multi-host job, a loopback choice is an error, not a silent bind.
  std::string net_devices;
  const char* ifname = std::getenv("SYNCLINE_SOCKET_IFNAME");
  const char* ucx_devices = std::getenv("UCX_NET_DEVICES");
  if (ifname != nullptr && *ifname != '\0' &&
      (ucx_devices == nullptr || *ucx_devices == '\0')) {
    backend::SocketChoice choice;
    if (!backend::ChooseSocketAddressFromEnv(nullptr, config.size, &choice, error)) {
      return SL_ERR_INVALID_ARGUMENT;
    }
    net_devices = choice.iface;
  }
  ucs_status_t status = t->context_.Init(net_devices);
  if (status != UCS_OK) {
    *error = std::string("ucp_init failed: ") + ucs_status_string(status) +
             " (check UCX_TLS, UCX_NET_DEVICES and other UCX_* variables)";
    return SL_ERR_UNAVAILABLE;
  }
  status = t->worker_.Init(t->context_.get());
  if (status != UCS_OK) {
    *error = std::string("creating the UCP worker failed: ") + ucs_status_string(status);
    return SL_ERR_UNAVAILABLE;
  }
  const PeerInfo mine = LocalPeerInfo(t->worker_.address());
  const sl_result_t code = PublishPeerInfo(*config.store, t->rank_, t->size_, mine,
                                           deadline, &t->ranks_on_host_, error);
  if (code != SL_OK) return code;

  std::lock_guard<std::mutex> driver(t->driver_mu_);
  t->endpoints_.Reset(t->worker_.get(), t->size_);
  t->peers_.assign(t->size_, PeerInfo());
  t->peers_[t->rank_] = mine;
  t->pidfds_.assign(t->size_, -1);
  t->dead_.assign(t->size_, "");
  t->error_args_.resize(t->size_);
  {
    std::lock_guard<std::mutex> connect(t->connect_mu_);
    t->requested_[t->rank_] = 1;
  }
  *transport = std::move(t);
  return SL_OK;
}

sl_result_t Transport::Prepare(const std::vector<int>& tranks, Clock::time_point deadline,
                               std::string* error) {
  std::lock_guard<std::mutex> connect(connect_mu_);
  for (int trank : tranks) {
    if (requested_[trank]) continue;
    if (store_ == nullptr) {
      *error = "rank " + std::to_string(trank) +
               "'s UCX address is unknown here and the store it was published in "
               "went with the communicator that created this worker";
      return SL_ERR_UNAVAILABLE;
    }
    PeerInfo info;
    const sl_result_t code = FetchPeerInfo(*store_, trank, deadline, &info, error);
    if (code != SL_OK) return code;
    requested_[trank] = 1;
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_.emplace_back(trank, std::move(info));
    has_pending_.store(true);
  }
  return SL_OK;
}

void Transport::ReleaseStore(Clock::time_point deadline) {
  std::vector<int> all(size_);
  for (int r = 0; r < size_; ++r) all[r] = r;
  std::string error;
  (void)Prepare(all, deadline, &error);  // a peer left unread fails when needed
  std::lock_guard<std::mutex> connect(connect_mu_);
  store_ = nullptr;
}

void Transport::ConnectPending() {
  if (!has_pending_.load()) return;
  std::vector<std::pair<int, PeerInfo>> pending;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending.swap(pending_);
    has_pending_.store(false);
  }
  const PeerInfo& mine = peers_[rank_];
  for (auto& [r, info] : pending) {
    peers_[r] = std::move(info);
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
    params.err_handler.cb = &Transport::OnEndpointError;
    params.err_handler.arg = &error_args_[r];
    const ucs_status_t status = ucp_ep_create(worker_.get(), &params, &endpoints_[r]);
    if (status != UCS_OK) {
      endpoints_[r] = nullptr;
      MarkDead(r, "cannot connect: " + std::string(ucs_status_string(status)) + ". " +
                      ReachabilityHint(mine, peers_[r], r, mode));
      continue;
    }
    // Same-host peers are watched by pidfd (see bootstrap.h).
    if (same_machine) pidfds_[r] = PidfdOpen(peers_[r].pid);
    for (Communicator* comm : comms_) comm->PeerConnected(r, endpoints_[r]);
  }
}

void Transport::StartProgressThread() {
  progress_thread_ = std::thread([this] { ProgressLoop(); });
}

Transport::~Transport() {
  stopping_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    thread_cv_.notify_all();
  }
  if (worker_.get() != nullptr) ucp_worker_signal(worker_.get());
  if (progress_thread_.joinable()) progress_thread_.join();
  std::lock_guard<std::mutex> driver(driver_mu_);
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
  // worker_, then context_, then the zombies go with the members.
}

void Transport::Attach(Communicator* comm) {
  std::lock_guard<std::mutex> driver(driver_mu_);
  comms_.push_back(comm);
  for (int r = 0; r < size_; ++r) {
    if (endpoints_.at(r) != nullptr) comm->PeerConnected(r, endpoints_.at(r));
    if (!dead_[r].empty()) comm->PeerDied(r, dead_[r]);
  }
}

void Transport::Detach(Communicator* comm) {
  comms_.erase(std::remove(comms_.begin(), comms_.end(), comm), comms_.end());
}

void Transport::AdoptZombie(std::unique_ptr<Operation> op) {
  zombies_.push_back(std::move(op));
}

void Transport::AdoptNotice(std::unique_ptr<NoticeSlot> slot) {
  notice_zombies_.push_back(std::move(slot));
}

void Transport::MarkDead(int trank, const std::string& why) {
  if (!dead_[trank].empty()) return;
  dead_[trank] = why;
  for (Communicator* comm : comms_) comm->PeerDied(trank, why);
}

void Transport::CheckPeers(bool force, Clock::time_point now) {
  if (!force && now - last_peer_check_ < kPeerCheckInterval) return;
  last_peer_check_ = now;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !dead_[r].empty() || peers_[r].machine != peers_[rank_].machine) {
      continue;
    }
    bool gone = false;
    if (pidfds_[r] >= 0) {
      pollfd fd{pidfds_[r], POLLIN, 0};
      gone = poll(&fd, 1, 0) > 0;
    } else {
      gone = kill(peers_[r].pid, 0) != 0 && errno == ESRCH;
    }
    if (gone) {
      MarkDead(r, "its process (pid " + std::to_string(peers_[r].pid) + " on " +
                      peers_[r].host + ") exited");
    }
  }
}

void Transport::OnEndpointError(void* arg, ucp_ep_h /*ep*/,
                                ucs_status_t status) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Runs inside ucp_worker_progress, on the driver.
  auto* error_arg = static_cast<ErrorArg*>(arg);
  error_arg->transport->MarkDead(
      error_arg->rank,
      std::string("UCX reported the endpoint failed: ") + ucs_status_string(status));
}

void Transport::Flush(Clock::time_point deadline) {
  ucp_request_param_t param{};
  void* request = ucp_worker_flush_nbx(worker_.get(), &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline) {
    ucp_worker_progress(worker_.get());
  }
  if (ucp_request_check_status(request) == UCS_INPROGRESS) {
    ucp_request_cancel(worker_.get(), request);
  }
  ucp_request_free(request);
}

}  // namespace syncline::ucx_backend
