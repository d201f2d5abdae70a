// nccl_test_util.h: helpers for the NCCL backend's tests.
//
//  - CudaDevices(): how many GPUs this process sees, or why it sees none
//    (the reason every GPU test skips with on a machine without one).
//  - LoadNcclTable(): the plugin's C table, loaded straight from the build's
//    lib/ folder, for tests of the ABI surface itself.
//  - MemoryStore: an in-process sl_store_t, so a test can run one rank of a
//    larger group and watch what it writes.
//  - DeviceCopy: a CUDA copy of a TypedBuffer, uploaded and read back.
#ifndef SYNCLINE_TESTS_BACKENDS_NCCL_NCCL_TEST_UTIL_H_
#define SYNCLINE_TESTS_BACKENDS_NCCL_NCCL_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "backends/collective_util.h"
#include "common/multiprocess.h"
#include "syncline/plugin_abi.h"

namespace syncline::testing {

// Number of visible GPUs; 0 with the reason in `why` when there are none.
inline int CudaDevices(std::string* why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    *why = std::string("no CUDA device is visible (cudaGetDeviceCount=") +
           std::to_string(static_cast<int>(rc)) + ": " + cudaGetErrorString(rc) + ")";
    (void)cudaGetLastError();
    return 0;
  }
  if (count == 0) *why = "no CUDA device is visible (cudaGetDeviceCount=0)";
  return count;
}

// The plugin's table, or nullptr with dlerror() in `why`.
inline const sl_backend_t* LoadNcclTable(std::string* why) {
  const std::string path = BuildLibDir() + "/libsyncline-backend-nccl.so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open
  if (handle == nullptr) {
    *why = path + ": " + dlerror();
    return nullptr;
  }
  auto entry =
      reinterpret_cast<sl_backend_entry_fn>(dlsym(handle, SL_BACKEND_ENTRY_NAME));
  if (entry == nullptr) {
    *why = path + " does not export " SL_BACKEND_ENTRY_NAME;
    return nullptr;
  }
  return entry();
}

// MemoryStore: set/get/add over a map. get() blocks until the key exists or
// its timeout, like the core's stores.
class MemoryStore {
 public:
  sl_store_t table() { return sl_store_t{sizeof(sl_store_t), this, &Set, &Get, &Free, &Add}; }

  bool Has(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return values_.count(key) > 0;
  }
  std::string Value(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return values_[key];
  }

 private:
  static MemoryStore* Self(void* ctx) { return static_cast<MemoryStore*>(ctx); }
  static sl_result_t Set(void* ctx, const char* key, const void* value, size_t len,
                         sl_error_t*) {
    MemoryStore* s = Self(ctx);
    {
      std::lock_guard<std::mutex> lock(s->mu_);
      s->values_[key] = std::string(static_cast<const char*>(value), len);
    }
    s->cv_.notify_all();
    return SL_OK;
  }
  static sl_result_t Get(void* ctx, const char* key, int64_t timeout_ms, void** value,
                         size_t* len, sl_error_t* err) {
    MemoryStore* s = Self(ctx);
    std::unique_lock<std::mutex> lock(s->mu_);
    auto has = [&] { return s->values_.count(key) > 0; };
    if (timeout_ms < 0) {
      s->cv_.wait(lock, has);
    } else if (!s->cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), has)) {
      std::snprintf(err->message, sizeof(err->message), "key %s: timed out", key);
      return SL_ERR_TIMEOUT;
    }
    const std::string& v = s->values_[key];
    *value = std::malloc(v.size() + 1);
    std::memcpy(*value, v.data(), v.size());
    *len = v.size();
    return SL_OK;
  }
  static void Free(void*, void* value) { std::free(value); }
  static sl_result_t Add(void* ctx, const char* key, int64_t delta, int64_t* result,
                         sl_error_t*) {
    MemoryStore* s = Self(ctx);
    std::lock_guard<std::mutex> lock(s->mu_);
    std::string& v = s->values_[key];
    const int64_t now = (v.empty() ? 0 : std::stoll(v)) + delta;
    v = std::to_string(now);
    *result = now;
    return SL_OK;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

// DeviceCopy: device memory holding a TypedBuffer's elements.
class DeviceCopy {
 public:
  DeviceCopy(DataType dtype, size_t count) : dtype_(dtype), count_(count) {
    if (cudaMalloc(&ptr_, bytes() + 1) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceCopy() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;

  bool ok() const { return ptr_ != nullptr; }
  size_t bytes() const { return count_ * DataTypeSize(dtype_); }
  // A CUDA view on `device`, ordered after `stream` (nullptr: default).
  BufferView View(int device, cudaStream_t stream = nullptr) {
    BufferView v = syncline::View(ptr_, count_, dtype_, Device::Cuda(device));
    v.stream = stream;
    return v;
  }
  void Upload(TypedBuffer& host) {
    (void)cudaMemcpy(ptr_, host.View().data, bytes(), cudaMemcpyHostToDevice);
  }
  void Download(TypedBuffer& host) {
    (void)cudaMemcpy(host.View().data, ptr_, bytes(), cudaMemcpyDeviceToHost);
  }

 private:
  DataType dtype_;
  size_t count_;
  void* ptr_ = nullptr;
};

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_BACKENDS_NCCL_NCCL_TEST_UTIL_H_
