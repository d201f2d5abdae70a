#include "backends/nccl/cuda_handles.h"

#include <utility>

namespace syncline::nccl_backend {

std::string CudaErrorText(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" +
         std::to_string(static_cast<int>(error)) + "): " + cudaGetErrorString(error);
}

ScopedDevice::ScopedDevice(int device) {
  status_ = cudaGetDevice(&previous_);
  if (status_ == cudaSuccess && previous_ != device) status_ = cudaSetDevice(device);
}

ScopedDevice::~ScopedDevice() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) {
    (void)cudaSetDevice(previous_);
  }
}

Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

cudaError_t Stream::Create(Stream* out) {
  cudaStream_t stream = nullptr;
  const cudaError_t rc = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (rc != cudaSuccess) return rc;
  *out = Stream();
  out->stream_ = stream;
  return cudaSuccess;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
  }
  return *this;
}

cudaError_t DeviceBuffer::Allocate(size_t bytes, DeviceBuffer* out) {
  void* ptr = nullptr;
  cudaError_t rc = cudaMalloc(&ptr, bytes);
  if (rc != cudaSuccess) return rc;
  rc = cudaMemset(ptr, 0, bytes);
  if (rc != cudaSuccess) {
    (void)cudaFree(ptr);
    return rc;
  }
  *out = DeviceBuffer();
  out->ptr_ = ptr;
  return cudaSuccess;
}

Event::~Event() {
  if (event_ != nullptr) pool_->Release(event_);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) pool_->Release(event_);
    pool_ = std::move(other.pool_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

std::shared_ptr<EventPool> EventPool::Create(int device) {
  return std::shared_ptr<EventPool>(new EventPool(device));
}

EventPool::~EventPool() {
  ScopedDevice on(device_);
  for (cudaEvent_t event : free_) (void)cudaEventDestroy(event);
}

cudaError_t EventPool::Acquire(Event* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      *out = Event(shared_from_this(), free_.back());
      free_.pop_back();
      return cudaSuccess;
    }
  }
  ScopedDevice on(device_);
  if (on.status() != cudaSuccess) return on.status();
  cudaEvent_t event = nullptr;
  const cudaError_t rc = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (rc != cudaSuccess) return rc;
  *out = Event(shared_from_this(), event);
  return cudaSuccess;
}

void EventPool::Release(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(event);
}

}  // namespace syncline::nccl_backend
