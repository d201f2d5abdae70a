// work.h: PyTorch's Work over Syncline's, and the thread that completes them.
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
// Threading: ops are posted on the caller's thread. One Completer thread per
// process group, owned and joined by it, waits for the ops in posting order
// (which is the order they finish in), runs `finish`, and completes the Work
// and its Future; Future callbacks therefore run on that thread.
#ifndef SYNCLINE_PYTHON_WORK_H_
#define SYNCLINE_PYTHON_WORK_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "absl/base/thread_annotations.h"
#include "syncline/work.h"

namespace syncline::torch_backend {

struct PendingOp {
  std::vector<std::unique_ptr<syncline::Work>> works;
  std::vector<at::Tensor> keep_alive;  // buffers the Syncline ops use
  std::vector<std::function<void()>> finish;  // copy results out, in order
  // Then: copy staged outputs back into non-contiguous originals.
  std::vector<std::function<void()>> copy_back;
};

class TorchWork : public c10d::Work {
 public:
  // `outputs` are the op's results as the Future reports them.
  TorchWork(int rank, c10d::OpType type, const char* name,
            std::vector<at::Tensor> outputs, PendingOp op);

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Called by the Completer only: waits for the Syncline ops, runs finish,
  // and completes this Work and its Future.
  void Run();

 private:
  std::string name_;
  std::vector<at::Tensor> outputs_;
  PendingOp op_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Completer
//
// Completes TorchWorks in the order they were posted, on its own thread.
// The destructor finishes every queued Work (each Syncline op has a
// deadline) and joins the thread, without the GIL.
class Completer {
 public:
  Completer();
  ~Completer();
  void Enqueue(c10::intrusive_ptr<TorchWork> work);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<TorchWork>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace syncline::torch_backend

#endif  // SYNCLINE_PYTHON_WORK_H_
