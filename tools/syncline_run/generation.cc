#include "generation.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace syncline::run {
namespace {

// Stderr lines kept per rank for the summary.
constexpr size_t kTailLines = 20;

// Wake-up period when nothing happens. SIGCHLD wakes the loop at once; this
// only bounds the damage should a wake-up ever be missed.
constexpr int kIdlePollMs = 250;

// How often a multi-node launcher asks the store whether another node failed.
constexpr absl::Duration kGroupCheckPeriod = absl::Milliseconds(200);

}  // namespace

absl::StatusOr<Generation::Result> Generation::Run(const Config& config) {
  Generation g(config);
  absl::Status spawned = g.SpawnAll();
  if (!spawned.ok()) {
    // Do not leave the others waiting for a rank that will never come.
    g.BeginStop(SIGTERM);
    g.Loop();
    return spawned;
  }
  g.Loop();
  return g.Finish();
}

absl::Status Generation::SpawnAll() {
  start_ = absl::Now();
  workers_.reserve(config_.specs.size());
  for (const WorkerSpec& spec : config_.specs) {
    absl::StatusOr<std::unique_ptr<WorkerProcess>> process = WorkerProcess::Spawn(spec);
    if (!process.ok()) return process.status();
    Worker w;
    w.process = std::move(process).value();
    w.out = std::make_unique<LineForwarder>(spec.rank, STDOUT_FILENO, 0);
    w.err = std::make_unique<LineForwarder>(spec.rank, STDERR_FILENO, kTailLines);
    workers_.push_back(std::move(w));
  }
  return absl::OkStatus();
}

void Generation::Loop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Worker*, int>> owners;  // parallel to fds[1..]
  while (AnyRunning()) {
    fds.clear();
    owners.clear();
    fds.push_back({config_.signals->fd(), POLLIN, 0});
    for (Worker& w : workers_) {
      for (int fd : {w.process->stdout_fd(), w.process->stderr_fd()}) {
        if (fd < 0) continue;
        fds.push_back({fd, POLLIN, 0});
        owners.emplace_back(&w, fd);
      }
    }
    absl::Time wake = absl::Now() + absl::Milliseconds(kIdlePollMs);
    if (stopping_ && !killed_) wake = std::min(wake, kill_at_);
    if (config_.group != nullptr && !stopping_) {
      wake = std::min(wake, next_group_check_);
    }
    int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(wake - absl::Now()) + 1, 0, kIdlePollMs));
    int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      Say(absl::StrCat("poll failed (", strerror(errno), "); stopping"));
      SignalAll(SIGKILL);
      killed_ = true;
    }
    if (fds[0].revents != 0) HandleSignals();
    // Reap before forwarding output, so that the recorded time of a death is
    // not delayed by however much output the others produced meanwhile.
    ReapAll();
    if (n > 0) ForwardReady(fds, owners);
    CheckOtherNodes();
    if (stopping_ && !killed_ && absl::Now() >= kill_at_) {
      int left = 0;
      for (const Worker& w : workers_) left += w.process->running() ? 1 : 0;
      Say(absl::StrCat("grace period over; killing ", left,
                       " remaining worker(s) with SIGKILL"));
      SignalAll(SIGKILL);
      killed_ = true;
    }
  }
  DrainAndClose();
}

void Generation::HandleSignals() {
  for (int signo : config_.signals->Drain()) {
    if (signo != SIGINT && signo != SIGTERM) continue;  // SIGCHLD: reap below
    if (stopping_) {
      // Asked twice, or while already stopping after a failure: the user
      // does not want to wait out the grace period.
      Say(absl::StrCat("received ", SignalName(signo),
                       " while stopping the workers; killing them now"));
      if (interrupt_signal_ == 0 && !failed_) interrupt_signal_ = signo;
      SignalAll(SIGKILL);
      killed_ = true;
      continue;
    }
    interrupt_signal_ = signo;
    Say(absl::StrCat("received ", SignalName(signo),
                     "; forwarding it to the workers (send it again to kill "
                     "them at once)"));
    BeginStop(signo);
  }
}

void Generation::CheckOtherNodes() {
  if (config_.group == nullptr || stopping_) return;
  absl::Time now = absl::Now();
  if (now < next_group_check_) return;
  next_group_check_ = now + kGroupCheckPeriod;
  absl::StatusOr<std::optional<NodeFailure>> remote =
      config_.group->RemoteFailure(config_.index);
  if (!remote.ok()) {
    // A store that stopped answering would otherwise cost a timeout on every
    // check and delay noticing our own workers' deaths.
    Say(absl::StrCat("lost contact with the store (", remote.status().message(),
                     "); no longer watching the other nodes"));
    next_group_check_ = absl::InfiniteFuture();
    return;
  }
  remote_failure_ = *std::move(remote);
  if (!remote_failure_) return;
  Say(absl::StrCat("node ", remote_failure_->node_rank, " reported: ",
                   remote_failure_->reason, "; stopping the workers here"));
  BeginStop(SIGTERM);
}

void Generation::ReapAll() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (!w.process->TryReap()) continue;
    reap_order_.push_back(static_cast<int>(i));
    // Its last words are in the pipe now: forward them before anything we
    // say about its death, and keep them for the summary.
    DrainOutput(w);
    const WorkerExit& e = *w.process->exit();
    if (e.ok() || stopping_) continue;
    failed_ = true;
    Say(absl::StrCat("rank ", w.process->rank(), " (pid ", w.process->pid(), ") ",
                     e.Describe(), "; stopping the other workers"));
    if (config_.group != nullptr) {
      RankOutcome o;
      o.rank = w.process->rank();
      o.pid = w.process->pid();
      o.exit = e;
      // Another node may have failed first; then that is the root cause and
      // ours a consequence.
      remote_failure_ = config_.group->ReportFailure(
          config_.index,
          {config_.node_rank, e.ShellStatus(), DescribeOutcome(o, start_)});
    }
    BeginStop(SIGTERM);
  }
}

void Generation::ForwardReady(const std::vector<pollfd>& fds,
                              const std::vector<std::pair<Worker*, int>>& owners) {
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    auto [w, fd] = owners[i - 1];
    // ReapAll() may have drained and closed it since poll() returned.
    if (fd != w->process->stdout_fd() && fd != w->process->stderr_fd()) continue;
    LineForwarder* f = fd == w->process->stdout_fd() ? w->out.get() : w->err.get();
    if (!f->ReadFrom(fd)) w->process->CloseOutput(fd);
  }
}

void Generation::SignalAll(int signo) {
  for (Worker& w : workers_) {
    // A reaped worker's group is signalled too: what it left running (a
    // helper holding its pipes, a stuck child) must not outlive the job.
    if (w.process->running()) w.stop_sent = true;
    w.process->Signal(signo);
  }
}

void Generation::BeginStop(int signo) {
  stopping_ = true;
  kill_at_ = absl::Now() + config_.grace_period;
  SignalAll(signo);
}

void Generation::DrainOutput(Worker& w) {
  for (int fd : {w.process->stdout_fd(), w.process->stderr_fd()}) {
    if (fd < 0) continue;
    LineForwarder* f = fd == w.process->stdout_fd() ? w.out.get() : w.err.get();
    if (!f->ReadFrom(fd, /*max_chunks=*/64)) w.process->CloseOutput(fd);
  }
}

void Generation::DrainAndClose() {
  // Every worker is reaped, but its last output may still sit in the pipe.
  // Read what is there now; do not wait for EOF, which a grandchild that
  // inherited the pipe could hold off forever.
  for (Worker& w : workers_) {
    DrainOutput(w);
    for (int fd : {w.process->stdout_fd(), w.process->stderr_fd()}) {
      if (fd < 0) continue;
      (fd == w.process->stdout_fd() ? w.out : w.err)->Finish();
      w.process->CloseOutput(fd);
    }
  }
}

bool Generation::AnyRunning() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const Worker& w) { return w.process->running(); });
}

Generation::Result Generation::Finish() {
  Result r;
  for (int i : reap_order_) {
    const Worker& w = workers_[i];
    RankOutcome o;
    o.rank = w.process->rank();
    o.pid = w.process->pid();
    o.exit = *w.process->exit();
    o.stopped_by_launcher = w.stop_sent;
    o.stderr_tail = w.err->tail();
    r.outcomes.push_back(std::move(o));
  }
  if (interrupt_signal_ != 0) {
    r.ending = Ending::kInterrupted;
    r.exit_status = 128 + interrupt_signal_;
  } else if (remote_failure_) {
    r.ending = Ending::kFailure;
    r.exit_status = remote_failure_->exit_status != 0 ? remote_failure_->exit_status : 1;
    r.summary = FormatFailureSummary(config_.index, start_, r.outcomes,
                                     absl::StrCat("on node ", remote_failure_->node_rank,
                                                  ", ", remote_failure_->reason));
  } else if (FindRootCause(r.outcomes) >= 0) {
    r.ending = Ending::kFailure;
    r.exit_status = FailureExitStatus(r.outcomes);
    r.summary = FormatFailureSummary(config_.index, start_, r.outcomes);
  }
  return r;
}

}  // namespace syncline::run
