// cuda_handles.h: RAII owners for the CUDA objects the NCCL backend uses.
//
// Every CUDA handle the plugin creates has exactly one owner here: the
// communicator's stream (Stream), completion events (EventPool / Event), a
// one-element device buffer for barriers (DeviceBuffer), and the current
// device of the calling thread (ScopedDevice), which is restored so that a
// post never changes the caller's CUDA state.
//
// Errors: constructors that can fail are factory functions returning
// cudaError_t; destructors log nothing and never throw (a failure to free
// during teardown after a device error is expected and harmless).
//
// Thread safety: EventPool is thread-safe; the other types are plain
// owners, used by one thread at a time (the communicator's locks say which).
#ifndef SYNCLINE_BACKENDS_NCCL_CUDA_HANDLES_H_
#define SYNCLINE_BACKENDS_NCCL_CUDA_HANDLES_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace syncline::nccl_backend {

// "cudaErrorInsufficientDriver (35): CUDA driver version is insufficient ..."
std::string CudaErrorText(cudaError_t error);

// ScopedDevice
//
// Makes `device` current on this thread and restores the previous device on
// destruction. status() is the result of the switch.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

// Stream: a non-blocking stream (it does not synchronize with the legacy
// default stream; ordering with the caller's stream is by events only).
class Stream {
 public:
  Stream() = default;
  ~Stream();
  Stream(Stream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Creates a stream on the current device.
  static cudaError_t Create(Stream* out);
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// DeviceBuffer: `bytes` of device memory on the current device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_) { other.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  static cudaError_t Allocate(size_t bytes, DeviceBuffer* out);
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

class EventPool;

// Event: one timing-free event, borrowed from an EventPool and returned to
// it on destruction. The pool outlives every Event (shared ownership).
class Event {
 public:
  Event() = default;
  Event(std::shared_ptr<EventPool> pool, cudaEvent_t event)
      : pool_(std::move(pool)), event_(event) {}
  ~Event();
  Event(Event&& other) noexcept : pool_(std::move(other.pool_)), event_(other.event_) {
    other.event_ = nullptr;
  }
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }

 private:
  std::shared_ptr<EventPool> pool_;
  cudaEvent_t event_ = nullptr;
};

// EventPool
//
// Reuses events, because creating one per op costs about as much as a small
// NCCL launch and the benchmark budget for an 8-byte allreduce is 5 us.
// Events are created on the device that was current when the pool was made
// (Acquire switches to it).
class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  static std::shared_ptr<EventPool> Create(int device);
  ~EventPool();

  // Hands out a free event, creating one if none is free.
  cudaError_t Acquire(Event* out);

 private:
  friend class Event;
  explicit EventPool(int device) : device_(device) {}
  void Release(cudaEvent_t event);

  const int device_;
  std::mutex mu_;
  std::vector<cudaEvent_t> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncline::nccl_backend

#endif  // SYNCLINE_BACKENDS_NCCL_CUDA_HANDLES_H_
