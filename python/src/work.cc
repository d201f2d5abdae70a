// work.cc: TorchWork and its Completer (see work.h).
#include "work.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>

#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include "absl/time/time.h"

namespace syncline::torch_backend {

TorchWork::TorchWork(int rank, c10d::OpType type, const char* name,
                     std::vector<at::Tensor> outputs, PendingOp op,
                     std::shared_ptr<Completer> completer)
    : c10d::Work(rank, type),
      name_(name),
      outputs_(std::move(outputs)),
      op_(std::move(op)),
      completer_(std::move(completer)) {}

bool TorchWork::wait(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline =
      timeout == kNoTimeout ? Clock::time_point::max() : Clock::now() + timeout;
  TORCH_CHECK(Complete(deadline), "syncline: ", name_, " did not finish within ",
              timeout.count(), " ms of wait(); it is still running");
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

bool TorchWork::isCompleted() { return Drive(/*block=*/false, Clock::time_point::max()); }

bool TorchWork::Complete(Clock::time_point deadline) { return Drive(/*block=*/true, deadline); }

bool TorchWork::completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

std::vector<at::Tensor> TorchWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> TorchWork::getFuture() {
  // Ops that have already ended (the caller waited for a later op, or
  // polled): complete the Work here, so that the Future is done when it is
  // returned, with no hand-off to the Completer. On the first request no
  // callback is chained yet; on a later one they run here, as from
  // isCompleted(). Not while the Completer still has Works handed over
  // before this one: their callbacks must run first, so this one queues
  // behind them.
  if (completer_->Idle()) (void)Drive(/*block=*/false, Clock::time_point::max());
  c10::intrusive_ptr<c10::ivalue::Future> future;
  std::exception_ptr error;
  bool mark = false, hand_over = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()));
      mark = ended_;  // else Finish() marks it
      error = exception_;
    }
    future = future_;
    if (!ended_ && !handed_over_) hand_over = handed_over_ = true;
  }
  if (mark) MarkFuture(future, error);
  if (hand_over) completer_->Enqueue(c10::intrusive_ptr<TorchWork>::reclaim_copy(this));
  return future;
}

bool TorchWork::Drive(bool block, Clock::time_point deadline) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A callback of this Work's Future, on the thread completing the Work:
    // the result is known (Finish()); waiting for the rest would be for
    // this very thread.
    if (running_ && ended_ && claimer_ == std::this_thread::get_id()) return true;
    if (block) {
      // Another thread may be completing it: wait for that to end.
      auto free = [this] { return completed_ || !running_; };
      if (deadline == Clock::time_point::max()) {
        cv_.wait(lock, free);
      } else if (!cv_.wait_until(lock, deadline, free)) {
        return false;
      }
    }
    if (completed_) return true;
    if (running_) return false;  // polling, and another thread has it
    running_ = true;
    claimer_ = std::this_thread::get_id();
  }
  if (!OpsEnded(block, deadline)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
    }
    cv_.notify_all();  // a waiter blocked on running_ may claim it now
    return false;
  }
  Finish();
  return true;
}

bool TorchWork::OpsEnded(bool block, Clock::time_point deadline) {
  for (auto& work : op_.works) {
    if (!block) {
      if (!work->Test()) return false;
      continue;
    }
    if (deadline == Clock::time_point::max()) {
      (void)work->Wait();  // returns when the op has ended; status() has it
      continue;
    }
    absl::Status s = work->Wait(absl::FromChrono(deadline - Clock::now()));
    // Either this wait ran out (the op runs on) or the op itself timed out.
    if (absl::IsDeadlineExceeded(s) && !work->Test()) return false;
  }
  return true;
}

void TorchWork::Finish() {
  absl::Status status;
  for (auto& work : op_.works) {
    absl::Status s = work->status();
    if (status.ok() && !s.ok()) status = s;
  }
  std::exception_ptr error;
  if (!status.ok()) {
    error = std::make_exception_ptr(std::runtime_error(
        std::string("syncline: ") + name_ + " failed: " + std::string(status.message())));
  } else if (!op_.finish.empty() || !op_.copy_back.empty()) {
    // (Most ops have no step: they skip the guard's thread-local state.)
    try {
      at::NoGradGuard no_grad;  // copies into leaves that require grad
      for (auto& step : op_.finish) step();
      for (auto& step : op_.copy_back) step();
    } catch (...) {
      error = std::current_exception();
    }
  }
  op_ = PendingOp{};  // the buffers may go now, before anyone sees the end
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    exception_ = error;
    future = future_;  // one made from now on is marked by getFuture()
    // No Future to mark (the common, waited-for op): complete at once.
    if (!future) MarkCompleted();
  }
  if (future) {
    // The Future first, as c10d's gloo does, so that a wait() that returns
    // finds it done. Its callbacks run here, with no lock held.
    MarkFuture(future, error);
    std::lock_guard<std::mutex> lock(mutex_);
    MarkCompleted();
  }
  cv_.notify_all();
}

void TorchWork::MarkCompleted() {
  completed_ = true;
  running_ = false;
  if (recordFunctionEndCallback_) {
    recordFunctionEndCallback_();
    recordFunctionEndCallback_ = nullptr;
  }
}

void TorchWork::MarkFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future,
                           const std::exception_ptr& error) const {
  if (error) {
    future->setError(error);
  } else {
    future->markCompleted(c10::IValue(outputs_));
  }
}

void TorchWork::release_resources() {
  // No reference is left, so no other thread is in a method of this Work
  // (weak references cannot be locked any more).
  if (!completed_) {
    // Dropped before it completed: its buffers stay alive and its results
    // land in the caller's tensors, on the Completer's thread.
    completer_->Enqueue(c10::make_intrusive<TorchWork>(rank_, opType_, name_,
                                                       std::move(outputs_), std::move(op_),
                                                       completer_));
  }
  outputs_.clear();
  op_ = PendingOp{};
  future_.reset();
}

Completer::Completer()
    : state_(std::make_shared<State>()), thread_([state = state_] { Loop(state); }) {
  Registry& registry = Registered();
  std::lock_guard<std::mutex> lock(registry.mu);
  // Those of Completers gone (their threads ended) are dropped here.
  auto& states = registry.states;
  states.erase(std::remove_if(states.begin(), states.end(),
                              [](const std::weak_ptr<State>& s) { return s.expired(); }),
               states.end());
  states.push_back(state_);
}

Completer::Registry& Completer::Registered() {
  static auto* registry = new Registry;  // never destroyed: used at exit
  return *registry;
}

bool Completer::Drained(State& state) {
  return state.ended || (state.queue.empty() && !state.busy);
}

void Completer::DrainAll() {
  std::vector<std::shared_ptr<State>> states;
  {
    Registry& registry = Registered();
    std::lock_guard<std::mutex> lock(registry.mu);
    for (const auto& weak : registry.states) {
      if (auto state = weak.lock()) states.push_back(std::move(state));
    }
  }
  // Each queued Work ends by its ops' deadline; a callback that never
  // returns would hold the exit for good, so the wait says what it is for.
  auto drain = [&states] {
    for (const auto& state : states) {
      std::unique_lock<std::mutex> lock(state->mu);
      while (!state->cv.wait_for(lock, std::chrono::seconds(30),
                                 [&] { return Drained(*state); })) {
        std::fprintf(stderr,
                     "syncline: at exit, still waiting for a process group's completion "
                     "thread (sl-completer): %zu Work(s) queued%s. Each ends by its op's "
                     "timeout; a Future callback that does not return holds the exit.\n",
                     state->queue.size(), state->busy ? ", one in hand" : "");
      }
    }
  };
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release no_gil;
    drain();
  } else {
    drain();
  }
}

Completer::~Completer() { Stop(); }

void Completer::Stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // it ends by itself once the queue is empty
    return;
  }
  // The Works still queued may run Python when they end: a callback chained
  // on a Future, or freeing a tensor whose Python object outlived Python's
  // last use of it. Both take the GIL on this thread, so waiting for them
  // with the GIL held (as a process group's destructor is called from
  // Python) would hang for good.
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release no_gil;
    thread_.join();
  } else {
    thread_.join();
  }
}

void Completer::Enqueue(c10::intrusive_ptr<TorchWork> work) {
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->stopping) {
      state_->queue.push_back(work);
      queued = true;
    }
  }
  if (!queued) {
    work->Complete();  // stopped: no thread to hand it to
    return;
  }
  state_->cv.notify_all();
}

bool Completer::Idle() {
  std::lock_guard<std::mutex> lock(state_->mu);
  // On its own thread (a callback of the Work it is completing), what it is
  // busy with is that caller's own Work, which is already done.
  const bool self = state_->thread == std::this_thread::get_id();
  return state_->queue.empty() && (self || !state_->busy);
}

void Completer::Loop(const std::shared_ptr<State>& state) {
  // Named, so that a profile or /proc/<pid>/task tells it from the backend's.
  pthread_setname_np(pthread_self(), "sl-completer");
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->thread = std::this_thread::get_id();
  }
  for (;;) {
    c10::intrusive_ptr<TorchWork> work;
    {
      std::unique_lock<std::mutex> lock(state->mu);
      state->busy = false;  // the one before, if any, is done
      if (state->queue.empty()) state->cv.notify_all();  // for DrainAll()
      state->cv.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
      if (state->queue.empty()) {  // stopping, and nothing left to finish
        state->ended = true;
        state->cv.notify_all();
        return;
      }
      work = std::move(state->queue.front());
      state->queue.pop_front();
      state->busy = true;
    }
    // Completing it may run a callback that drops the last reference to the
    // process group, and releasing it the last one to the Completer: both
    // end in Stop() on this thread, which detaches it. Only `state` is
    // touched from here on.
    work->Complete();
    work.reset();
  }
}

}  // namespace syncline::torch_backend
