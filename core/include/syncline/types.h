// types.h: the value types of Syncline's collective interface.
//
// DataType, ReduceOp, Device and BufferView describe what an op works on.
// They are plain values, free of any transport or of libtorch.
//
// Example:
//   std::vector<float> grad(1024, 1.0f);
//   syncline::BufferView view = syncline::View(grad);   // f32, cpu, 1024
#ifndef SYNCLINE_TYPES_H_
#define SYNCLINE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

// Element types every backend understands (capabilities may narrow them).
enum class DataType : int {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
};
inline constexpr int kNumDataTypes = 8;

// Reductions. kAvg is the sum divided by the world size (integer types
// truncate toward zero).
enum class ReduceOp : int { kSum = 0, kProd = 1, kMin = 2, kMax = 3, kAvg = 4 };
inline constexpr int kNumReduceOps = 5;

// DataTypeSize()
//
// Bytes per element, e.g. DataTypeSize(DataType::kBFloat16) == 2.
size_t DataTypeSize(DataType dtype);

// DataTypeName() / ReduceOpName()
//
// Short names used in messages and logs: "f32", "bf16", "sum", "avg".
const char* DataTypeName(DataType dtype);
const char* ReduceOpName(ReduceOp op);

// ParseDataType()
//
// Inverse of DataTypeName(); nullopt for an unknown name.
absl::optional<DataType> ParseDataType(absl::string_view name);

// Device
//
// Where a buffer lives. `index` is the CUDA ordinal (0 for CPU).
struct Device {
  enum class Type : int { kCpu = 0, kCuda = 1 };
  Type type = Type::kCpu;
  int index = 0;

  static Device Cpu() { return Device{}; }
  static Device Cuda(int index) { return Device{Type::kCuda, index}; }
  bool is_cpu() const { return type == Type::kCpu; }
  bool is_cuda() const { return type == Type::kCuda; }
  std::string ToString() const;  // "cpu", "cuda:1"
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.index == b.index;
  }
};

// BufferView
//
// A non-owning view of `count` elements of `dtype` at `data`. The caller
// keeps the memory alive until the op using it has completed. `stream` is a
// cudaStream_t for CUDA buffers (nullptr: the default stream).
struct BufferView {
  void* data = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  Device device;
  void* stream = nullptr;

  size_t bytes() const { return count * DataTypeSize(dtype); }
};

// DataTypeOf<T>()
//
// Maps a C++ element type to its DataType; uint16_t is not mapped because it
// is ambiguous between f16 and bf16 (use View(ptr, n, dtype) for those).
template <typename T>
constexpr DataType DataTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DataType::kFloat64;
  else if constexpr (std::is_same_v<T, int8_t>) return DataType::kInt8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DataType::kUInt8;
  else if constexpr (std::is_same_v<T, int32_t>) return DataType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return DataType::kInt64;
  else static_assert(sizeof(T) == 0, "no DataType for this C++ type");
}

// View()
//
// Convenience constructors for CPU buffers.
//   std::vector<int64_t> v(8);  auto a = View(v);
//   uint16_t half[4];           auto b = View(half, 4, DataType::kFloat16);
template <typename T>
BufferView View(T* data, size_t count) {
  return BufferView{static_cast<void*>(data), count, DataTypeOf<T>(), Device{},
                    nullptr};
}
template <typename T>
BufferView View(std::vector<T>& v) {
  return View(v.data(), v.size());
}
inline BufferView View(void* data, size_t count, DataType dtype,
                       Device device = Device{}) {
  return BufferView{data, count, dtype, device, nullptr};
}

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_TYPES_H_
