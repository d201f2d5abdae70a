#include "backends/ucx/communicator.h"

#include <poll.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <utility>

#include "backends/ucx/algorithms/algorithms.h"
#include "backends/ucx/split_plan.h"
#include "backends/ucx/tag.h"
#include "syncline/plugin_sdk/error.h"

namespace syncline::ucx_backend {
namespace {

using backend::SlSetError;

// Bootstrap deadline when the core passes none.
constexpr std::chrono::minutes kDefaultBootstrapTimeout(5);

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// This machine as a number, for counting a split group's ranks per host
// (FNV-1a of the boot id and pid namespace: the same in every process).
int64_t MachineId(const std::string& machine) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : machine) h = (h ^ c) * 1099511628211ull;
  return static_cast<int64_t>(h);
}

std::vector<int> Identity(int size) {
  std::vector<int> ranks(size);
  for (int r = 0; r < size; ++r) ranks[r] = r;
  return ranks;
}

}  // namespace

Communicator::Communicator(std::shared_ptr<Transport> transport, std::vector<int> members,
                           int rank, int on_host, uint32_t space, uint64_t comm_id,
                           int64_t timeout_ms, const Options& options,
                           std::string options_text)
    : rank_(rank),
      size_(static_cast<int>(members.size())),
      space_(space),
      comm_id_(comm_id),
      timeout_ms_(timeout_ms),
      options_(options),
      options_text_(std::move(options_text)),
      transport_(std::move(transport)),
      members_(std::move(members)),
      rank_of_(transport_->size(), -1),
      eps_(size_, nullptr),
      prepared_(size_, 0),
      dead_(size_, "") {
  for (int r = 0; r < size_; ++r) rank_of_[members_[r]] = r;
  prepared_[rank_] = 1;
  wire_ = Wire{transport_->worker(), &eps_, space_, rank_};
  oversubscribed_ = RanksOversubscribe(on_host);
}

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
  const auto deadline =
      start + (config.timeout_ms > 0 ? std::chrono::milliseconds(config.timeout_ms)
                                     : std::chrono::duration_cast<std::chrono::milliseconds>(
                                           kDefaultBootstrapTimeout));
  std::shared_ptr<Transport> transport;
  sl_result_t code = Transport::Create(config, options, deadline, &transport, &error);
  std::unique_ptr<Communicator> created;
  if (code == SL_OK) {
    created.reset(new Communicator(transport, Identity(config.size), config.rank,
                                   transport->ranks_on_host(), /*space=*/0, config.comm_id, config.timeout_ms, options,
                                   config.options != nullptr ? config.options : ""));
    created->creator_ = true;
    transport->Attach(created.get());
    code = created->Hello(deadline, &error);
  }
  if (code != SL_OK) {
    transport.reset();  // `created` is the last holder: its destructor takes it
    const double timeout_s =
        config.timeout_ms > 0 ? config.timeout_ms / 1000.0
                              : std::chrono::duration<double>(kDefaultBootstrapTimeout).count();
    return SlSetError(err, code,
                      "ucx comm_create (comm id %" PRIu64
                      ") failed on rank %d/%d after %.1f s (timeout %.1f s): %s",
                      config.comm_id, config.rank, config.size, SecondsSince(start),
                      timeout_s, error.c_str());
  }
  transport->StartProgressThread();
  *comm = std::move(created);
  return SL_OK;
}

// One byte to and from each ring neighbour, before Create() returns: proves
// that this rank's transport actually carries data (an address can resolve
// yet lead nowhere, e.g. tcp to an unroutable interface) without
// connecting to every peer. Runs before the progress thread starts, as the
// only driver.
sl_result_t Communicator::Hello(Clock::time_point deadline, std::string* error) {
  if (size_ == 1) return SL_OK;
  ScheduleBuilder b("hello", SL_U8, SL_SUM);
  uint8_t* bytes = b.AllocScratch(3);
  b.NewRound();
  const int neighbours[2] = {(rank_ + 1) % size_, (rank_ + size_ - 1) % size_};
  for (int i = 0; i < (size_ > 2 ? 2 : 1); ++i) {
    b.Send(neighbours[i], bytes + 2, 1, 0);
    b.Recv(neighbours[i], bytes + i, 1, 0);
  }
  Schedule schedule = b.Finish();
  sl_op_t op = sl_op_init(SL_OP_BARRIER);
  op.timeout_ms = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
             .count());
  sl_result_t prepared = PreparePeers(schedule, op, error);
  if (prepared != SL_OK) return prepared;
  auto request = std::make_shared<Request>(transport_.get(), op, size_, "hello");
  auto hello = std::make_unique<Operation>(
      request, std::make_shared<const Schedule>(std::move(schedule)), /*p2p=*/false,
      /*seq=*/0);
  Transport& t = *transport_;
  std::lock_guard<std::mutex> driver(t.driver_mu());
  t.ConnectPending();
  const int next = (rank_ + 1) % size_;
  while (!hello->Advance(wire_)) {
    if (ucp_worker_progress(t.worker()) != 0) continue;
    t.CheckPeers(/*force=*/false);
    std::string dead;
    for (int r = 0; r < size_; ++r) {
      if (!dead_[r].empty()) dead += " rank " + std::to_string(r) + ": " + dead_[r] + ";";
    }
    if (!dead.empty() || Clock::now() >= deadline) {
      const std::string waiting = hello->Waiting();
      hello->Cancel(t.worker());
      *error = (dead.empty() ? std::string("no hello over UCX within the timeout from ")
                             : "peers died during the hello:" + dead + " still waiting on ") +
               waiting + ". Transports to rank " + std::to_string(next) + ": " +
               (eps_[next] != nullptr ? EndpointTransports(eps_[next]) : "none") + ". " +
               ReachabilityHint(t.peer(rank_), t.peer(next), next,
                                ChooseErrorMode(options_.peer_error_mode, true));
      // Its sends finish when the endpoints close, with the transport.
      t.AdoptZombie(std::move(hello));
      return dead.empty() ? SL_ERR_TIMEOUT : SL_ERR_PEER;
    }
    if (ucp_worker_arm(t.worker()) == UCS_OK) {
      pollfd fd{t.worker_event_fd(), POLLIN, 0};
      poll(&fd, 1, 1);
    }
  }
  if (hello->failed()) {
    *error = "the hello exchange failed: " + hello->error() + ". " +
             ReachabilityHint(t.peer(rank_), t.peer(next), next,
                              UCP_ERR_HANDLING_MODE_PEER);
    const sl_result_t code = hello->code();
    t.AdoptZombie(std::move(hello));
    return code;
  }
  PostNoticeRecv();
  return SL_OK;
}

sl_result_t Communicator::Split(int32_t color, int32_t key, const sl_store_t* store,
                                uint64_t comm_id, std::unique_ptr<Communicator>* child,
                                sl_error_t* err) {
  child->reset();
  std::unique_lock<std::mutex> split(transport_->split_mu(), std::try_to_lock);
  if (!split.owns_lock()) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                      "ucx comm_split on %s: another split of a communicator of the same "
                      "family (sharing this one's worker) is running on this rank; split "
                      "them one at a time, in the same order on every rank",
                      Where().c_str());
  }
  // Everyone's (color, key, next free tag space, machine), over the parent.
  std::vector<int64_t> mine = {color, key, transport_->next_space(),
                               MachineId(transport_->peer(transport_->rank()).machine)};
  std::vector<int64_t> all(4 * static_cast<size_t>(size_));
  sl_op_t op = sl_op_init(SL_OP_ALLGATHER);
  op.send = sl_buffer_t{mine.data(), mine.size(), SL_I64, SL_DEVICE_CPU, 0, nullptr};
  op.recv = sl_buffer_t{all.data(), all.size(), SL_I64, SL_DEVICE_CPU, 0, nullptr};
  op.timeout_ms = timeout_ms_;
  std::shared_ptr<Request> request;
  const std::string label =
      "split (allgather of colors, comm id " + std::to_string(comm_id) + ")";
  sl_result_t code = PostLabeled(op, label, &request, err);
  if (code != SL_OK) return code;
  code = request->Wait(-1, err);  // bounded by the op's own deadline
  if (code != SL_OK) return code;
  std::vector<SplitEntry> entries(size_);
  for (int r = 0; r < size_; ++r) entries[r] = {all[4 * r], all[4 * r + 1], all[4 * r + 2]};
  const SplitPlan plan = PlanSplit(entries, rank_, options_.tag_spaces);
  transport_->set_next_space(plan.next_space);
  if (color < 0) return SL_OK;
  const int new_size = static_cast<int>(plan.members.size());
  if (plan.exhausted) {
    // Every rank of the parent sees the same table, so every member of the
    // group takes this path together.
    if (store == nullptr) {
      return SlSetError(err, SL_ERR_UNAVAILABLE,
                        "ucx comm_split on %s: this family of communicators has used all "
                        "%lld tag spaces and no store was given to build a new worker",
                        Where().c_str(), static_cast<long long>(options_.tag_spaces));
    }
    sl_comm_config_t config{sizeof(sl_comm_config_t), plan.rank,     new_size,   store,
                            SL_DEVICE_CPU, 0,          timeout_ms_,
                            comm_id,       options_text_.empty() ? nullptr : options_text_.c_str()};
    return Create(config, child, err);
  }
  std::vector<int> members(new_size);
  int on_host = 0;
  for (int i = 0; i < new_size; ++i) {
    members[i] = members_[plan.members[i]];
    on_host += all[4 * plan.members[i] + 3] == mine[3];
  }
  child->reset(new Communicator(transport_, std::move(members), plan.rank, on_host,
                                plan.space, comm_id, timeout_ms_, options_, options_text_));
  transport_->Attach(child->get());
  backend::SlClearError(err);
  return SL_OK;
}

Communicator::~Communicator() {
  stopping_.store(true);
  std::vector<std::shared_ptr<Request>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(pending_);
  }
  for (auto& request : pending) {
    request->Complete(SL_ERR_ABORTED, "ucx " + request->Describe() + " on " + Where() +
                                          ": the communicator was destroyed first");
  }
  Transport& t = *transport_;
  // This communicator's store goes with it; split children that stay may
  // still need addresses from it.
  if (creator_ && transport_.use_count() > 1) {
    t.ReleaseStore(Clock::now() + (timeout_ms_ > 0 ? std::chrono::milliseconds(timeout_ms_)
                                                    : kDefaultBootstrapTimeout));
  }
  {
    std::lock_guard<std::mutex> driver(t.driver_mu());
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& op : incoming_) collectives_.push_back(std::move(op));
      incoming_.clear();
    }
    // Ops that never finished leave the transport's count; those that
    // still hold UCP requests stay alive with the transport.
    auto drop = [&](std::unique_ptr<Operation> op) {
      op->Cancel(t.worker());
      t.CountFinished();
      if (op->outstanding() > 0) t.AdoptZombie(std::move(op));
    };
    for (auto& op : collectives_) drop(std::move(op));
    for (auto& op : p2p_) drop(std::move(op));
    collectives_.clear();
    p2p_.clear();
    if (aborted_.load() && size_ > 1) NoticeAbort();
    if (notice_->request != nullptr) ucp_request_cancel(t.worker(), notice_->request);
    t.Detach(this);
    for (int i = 0; i < 1000 && ucp_worker_progress(t.worker()) != 0; ++i) {
    }
    if (notice_->request != nullptr) t.AdoptNotice(std::move(notice_));
    // Others of the family may keep the worker alive but idle: deliver this
    // communicator's last messages now (the Transport's destructor does it
    // for the last one).
    if (transport_.use_count() > 1) t.Flush(Clock::now() + std::chrono::seconds(2));
  }
  // transport_ goes with the members: the family's last communicator takes
  // the worker with it.
}

std::string Communicator::Where() const {
  return "rank " + std::to_string(rank_) + "/" + std::to_string(size_);
}

sl_result_t Communicator::PostLabeled(const sl_op_t& op, const std::string& label,
                                      std::shared_ptr<Request>* request, sl_error_t* err) {
  std::string message;
  sl_result_t code = ValidateOp(op, rank_, size_, &message);
  if (code != SL_OK) {
    return SlSetError(err, code, "ucx %s on %s", message.c_str(), Where().c_str());
  }
  auto req = std::make_shared<Request>(transport_.get(), op, size_, label);
  const bool p2p = op.kind == SL_OP_SEND || op.kind == SL_OP_RECV;
  if (aborted_.load() || stopping_.load()) {
    return SlSetError(err, SL_ERR_ABORTED, "ucx %s on %s: the communicator was aborted",
                      req->Describe().c_str(), Where().c_str());
  }
  // The lock only when broken: one lock pair fewer per op (bench/README.md,
  // "The 8-byte path").
  if (!p2p && broken_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    return SlSetError(err, broken_code_,
                      "ucx %s not run on %s: the communicator is unusable after an "
                      "earlier failure: %s",
                      req->Describe().c_str(), Where().c_str(), broken_message_.c_str());
  }
  AlgoArgs args{&op, rank_, size_, &options_, oversubscribed_};
  std::shared_ptr<const Schedule> schedule = schedules_.Get(args);
  code = PreparePeers(*schedule, op, &message);
  if (code != SL_OK) {
    return SlSetError(err, code, "ucx %s on %s: %s", req->Describe().c_str(),
                      Where().c_str(), message.c_str());
  }
  auto operation = std::make_unique<Operation>(req, std::move(schedule), p2p,
                                               p2p ? 0 : TagSeq(++collective_seq_));
  transport_->CountPosted();
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(std::move(operation));
    pending_.push_back(req);
  }
  transport_->OnPosted();
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
  // on its next pass (Advance). Then wake a driver sleeping on the event fd.
  if (transport_->driver_mu().try_lock()) {
    NoticeAbort();
    transport_->driver_mu().unlock();
  }
  transport_->Wake();
}

sl_result_t Communicator::PreparePeers(const Schedule& schedule, const sl_op_t& op,
                                       std::string* error) {
  std::vector<int> tranks;
  for (const Round& round : schedule.rounds) {
    for (const Transfer& t : round.transfers) {
      if (prepared_[t.peer]) continue;
      prepared_[t.peer] = 1;
      tranks.push_back(members_[t.peer]);
    }
  }
  if (tranks.empty()) return SL_OK;  // the common case: no store, no lock
  const int64_t ms = op.timeout_ms > 0 ? op.timeout_ms : timeout_ms_;
  const auto deadline =
      Clock::now() + (ms > 0 ? std::chrono::milliseconds(ms)
                             : std::chrono::duration_cast<std::chrono::milliseconds>(
                                   kDefaultBootstrapTimeout));
  const sl_result_t code = transport_->Prepare(tranks, deadline, error);
  if (code != SL_OK) {
    for (int trank : tranks) prepared_[rank_of_[trank]] = 0;  // retried by a later op
  }
  return code;
}

void Communicator::PeerConnected(int trank, ucp_ep_h ep) {
  const int r = rank_of_[trank];
  if (r >= 0) eps_[r] = ep;
}

void Communicator::PeerDied(int trank, const std::string& why) {
  const int r = rank_of_[trank];
  if (r < 0 || !dead_[r].empty()) return;
  dead_[r] = why;
  any_dead_ = true;
}

}  // namespace syncline::ucx_backend
