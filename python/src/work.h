// work.h: PyTorch's Work over Syncline's, and the thread that completes the
// Works nobody waits for.
//
// One c10d op may post several Syncline ops (a padded alltoall, a gather
// over allgather) and must copy results out afterwards (staged non-contiguous
// tensors, output lists). A PendingOp holds all of that: the Syncline Works,
// the tensors they read and write (kept alive until the end), and the
// `finish` steps, run in order once every Syncline op has succeeded.
//
// TorchWork is what PyTorch sees. It follows c10d's Work contract:
// wait(timeout) blocks (forever with no timeout) and rethrows the op's
// error; isCompleted/isSuccess/exception report it; getFuture() is a Future
// of the output tensors, completed (or set in error) when the op ends, so
// DDP's communication hooks chain on it.
//
// Who completes a Work (waits for its Syncline ops, runs `finish`, drops the
// buffers, marks it and its Future complete): exactly one thread, whichever
// gets there first of
//   - a caller of wait(): the common path. The waiting thread itself waits
//     for the Syncline ops (with UCX it drives their progress), so a
//     blocking op costs no hand-off to another thread and back;
//   - a caller of isCompleted() or getFuture(), when the Syncline ops have
//     ended (it tests them, never blocks);
//   - the process group's Completer thread, for the Works nobody may ever
//     wait for: those whose Future was requested (getFuture(): DDP's comm
//     hooks, then() chains), so that the Future completes on its own, and
//     those dropped before they completed (their buffers must outlive the
//     Syncline ops, and their results still land in the caller's tensors);
//   - the process group's end (Collectives::Close()), which completes every
//     Work still running, so that no op is cut off by the Communicator's end.
// The others wait for it. The completing thread marks the Future before the
// Work (as c10d's gloo does: a wait() that returns finds the Future done)
// and runs its callbacks holding no lock of the Work; a callback that
// waits for this Work returns at once. Each Work completes when its own
// ops have ended: wait() on one does not complete the Works posted before
// it (as with c10d's gloo, whose sends, receives and collectives end
// independently). The Completer completes the Works handed to it in the
// order they were handed over (for Futures: posting order), so Futures
// nobody waits for complete, and run their callbacks, in posting order.
//
// Threading: ops are posted on the caller's thread. Every method of
// TorchWork may be called from any thread; none holds a lock while it waits
// for the network or runs a callback. One Completer per process group:
// shared with its Works (a dropped Work hands its op over), its thread
// started by the constructor and joined by Stop(), which the process group
// calls.
#ifndef SYNCLINE_PYTHON_WORK_H_
#define SYNCLINE_PYTHON_WORK_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "syncline/work.h"

namespace syncline::torch_backend {

class Completer;

// Most ops post one Syncline op over one or two buffers: those live inside
// the PendingOp (and so inside the TorchWork), with no allocation of their
// own per op.
struct PendingOp {
  absl::InlinedVector<std::unique_ptr<syncline::Work>, 1> works;
  absl::InlinedVector<at::Tensor, 2> keep_alive;  // buffers the Syncline ops use
  std::vector<std::function<void()>> finish;  // copy results out, in order
  // Then: copy staged outputs back into non-contiguous originals.
  std::vector<std::function<void()>> copy_back;
};

class TorchWork : public c10d::Work {
 public:
  using Clock = std::chrono::steady_clock;

  // `outputs` are the op's results as the Future reports them; `name` is a
  // string literal ("allreduce"). `completer` takes the Work over if its
  // Future is requested or it is dropped before it completed.
  TorchWork(int rank, c10d::OpType type, const char* name,
            std::vector<at::Tensor> outputs, PendingOp op,
            std::shared_ptr<Completer> completer);

  // Completes the Work on this thread (see the file comment), or waits for
  // the thread that is completing it. Throws the op's error.
  bool wait(std::chrono::milliseconds timeout) override;
  // Never blocks: tests the Syncline ops, and completes the Work here if
  // they have ended.
  bool isCompleted() override;
  std::vector<at::Tensor> result() override;
  // The Future of the outputs. If the Syncline ops have ended, the Work
  // completes here (tested, never waited for) and the Future is returned
  // done; otherwise the Completer completes it unless a waiter gets there
  // first.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Complete()
  //
  // Completes the Work on this thread, waiting for the Syncline ops until
  // `deadline` (Clock::time_point::max(): no limit), or waits for the thread
  // that is completing it. True once the Work has completed (now or
  // before), successfully or not; false if `deadline` passed first (the op
  // runs on, and a later call may complete it). Any thread.
  bool Complete(Clock::time_point deadline = Clock::time_point::max());

  // True once the Work has completed. Never blocks on the op.
  bool completed() const;

  // Called by intrusive_ptr when the last reference goes: a Work that had
  // not completed hands its op to the Completer.
  void release_resources() override;

 private:
  // Completes the Work if its Syncline ops end by `deadline`; with `block`
  // false, only tests them. See Complete().
  bool Drive(bool block, Clock::time_point deadline);
  // Waits for (or, with `block` false, tests) every Syncline op; true once
  // all have ended. Called by the thread that claimed the op (running_).
  bool OpsEnded(bool block, Clock::time_point deadline);
  // The claiming thread, once the ops have ended: runs finish and
  // copy_back, drops the buffers, marks the Work complete and its Future.
  void Finish();
  // completed_ and running_ once the Future (if any) is marked; with
  // mutex_ held.
  void MarkCompleted();
  void MarkFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future,
                  const std::exception_ptr& error) const;

  const char* const name_;
  std::vector<at::Tensor> outputs_;  // set at construction; cleared by release_resources
  // Touched only by the thread that set running_ (or release_resources,
  // when no other thread can hold the Work).
  PendingOp op_;
  const std::shared_ptr<Completer> completer_;
  // Guarded by c10d::Work::mutex_ (as are completed_ and exception_, with
  // cv_ signalling every change). The Future is made on first request.
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool running_ = false;  // a thread has claimed op_: claimer_
  std::thread::id claimer_;
  // The ops have ended and exception_ is final; the Future is being marked
  // (completed_ follows once its callbacks have run).
  bool ended_ = false;
  bool handed_over_ = false;  // queued on the Completer
};

// Completer
//
// Completes the TorchWorks handed to it, in the order they were handed
// over, on its own thread. Enqueue() may be called from any thread; after
// Stop(), it completes the Work on the calling thread instead. Stop()
// joins the thread without the GIL.
//
// It waits for a Work's Syncline ops with a blocking Wait(), from the
// moment the Work is handed over (a DDP bucket: while backward still
// runs). With UCX it then drives the ops: the copies and reductions a
// bucket needs run on it (their CPU is the op's, wherever it runs), it
// busy-polls for busy_poll_us after each event and then sleeps in poll()
// on the worker. Test() with a sleep between calls would cost no less:
// each Test makes one pass, and once they come further apart than
// async_progress_delay_us the backend's progress thread drives with the
// same busy-poll; it would only add up to a sleep to each Future's end.
// The thread is named "sl-completer" (/proc/<pid>/task/*/comm, profiles).
class Completer {
 public:
  Completer();
  ~Completer();  // Stop()s if the owner has not

  void Enqueue(c10::intrusive_ptr<TorchWork> work);
  // Nothing queued and nothing being completed: a Work that ends now may
  // complete on its own thread without overtaking one handed over before it
  // (callbacks run in posting order).
  bool Idle();
  // Completes every queued Work (each Syncline op has a deadline) and joins
  // the thread. Called on the Completer's own thread (a Future callback that
  // drops the process group's last reference, or the last Work holding the
  // Completer released there), it cannot join itself: it lets the thread go
  // on alone, and the thread completes what is queued and ends, holding the
  // queue's State, not the Completer.
  void Stop();

  // Waits, without the GIL, until every Completer of this process, those
  // still owned and those let go by Stop() on their own thread, has
  // nothing queued and nothing in hand. Registered with Python's atexit
  // (module.cc): once the interpreter finalizes, a thread that takes the
  // GIL is ended by pthread_exit, whose unwinding through a destructor
  // (a callback's release) is std::terminate. Whatever a Completer still
  // holds may need the GIL: a callback that sleeps or releases it, the
  // callback object's release after it ran.
  static void DrainAll();

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<c10::intrusive_ptr<TorchWork>> queue ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
    bool busy ABSL_GUARDED_BY(mu) = false;  // completing one it took off the queue
    std::thread::id thread ABSL_GUARDED_BY(mu);  // Loop()'s
    bool ended ABSL_GUARDED_BY(mu) = false;       // Loop() returned
  };
  // True when `state` holds nothing: empty queue and not busy, or ended.
  static bool Drained(State& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu);
  // The States of every Completer made, for DrainAll().
  struct Registry {
    std::mutex mu;
    std::vector<std::weak_ptr<State>> states ABSL_GUARDED_BY(mu);
  };
  static Registry& Registered();
  static void Loop(const std::shared_ptr<State>& state);

  const std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace syncline::torch_backend

#endif  // SYNCLINE_PYTHON_WORK_H_
