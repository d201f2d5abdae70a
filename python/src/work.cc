// work.cc: TorchWork and its Completer (see work.h).
#include "work.h"

#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

namespace syncline::torch_backend {

TorchWork::TorchWork(int rank, c10d::OpType type, const char* name,
                     std::vector<at::Tensor> outputs, PendingOp op)
    : c10d::Work(rank, type),
      name_(name),
      outputs_(std::move(outputs)),
      op_(std::move(op)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

bool TorchWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    TORCH_CHECK(false, "syncline: ", name_, " did not finish within ",
                timeout.count(), " ms of wait(); it is still running");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

std::vector<at::Tensor> TorchWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> TorchWork::getFuture() { return future_; }

void TorchWork::Run() {
  absl::Status status;
  for (auto& work : op_.works) {
    absl::Status s = work->Wait();
    if (status.ok() && !s.ok()) status = s;
  }
  std::exception_ptr error;
  if (!status.ok()) {
    error = std::make_exception_ptr(std::runtime_error(
        "syncline: " + name_ + " failed: " + std::string(status.message())));
  } else {
    try {
      at::NoGradGuard no_grad;  // copies into leaves that require grad
      for (auto& step : op_.finish) step();
      for (auto& step : op_.copy_back) step();
    } catch (...) {
      error = std::current_exception();
    }
  }
  op_ = PendingOp{};  // the buffers may go now
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

Completer::Completer() : thread_([this] { Loop(); }) {}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void Completer::Loop() {
  for (;;) {
    c10::intrusive_ptr<TorchWork> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to finish
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work->Run();
  }
}

}  // namespace syncline::torch_backend
