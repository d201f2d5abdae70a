// types.cc: names and sizes of the value types.
#include "syncline/types.h"

#include "absl/strings/str_cat.h"

namespace syncline {

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: case DataType::kInt32: return 4;
    case DataType::kFloat64: case DataType::kInt64: return 8;
    case DataType::kFloat16: case DataType::kBFloat16: return 2;
    case DataType::kInt8: case DataType::kUInt8: return 1;
  }
  return 0;
}

const char* DataTypeName(DataType dtype) {
  static const char* const kNames[] = {"f32", "f64", "f16", "bf16",
                                       "i8",  "u8",  "i32", "i64"};
  int i = static_cast<int>(dtype);
  return (i >= 0 && i < kNumDataTypes) ? kNames[i] : "invalid-dtype";
}

const char* ReduceOpName(ReduceOp op) {
  static const char* const kNames[] = {"sum", "prod", "min", "max", "avg"};
  int i = static_cast<int>(op);
  return (i >= 0 && i < kNumReduceOps) ? kNames[i] : "invalid-op";
}

absl::optional<DataType> ParseDataType(absl::string_view name) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (name == DataTypeName(static_cast<DataType>(i))) {
      return static_cast<DataType>(i);
    }
  }
  return absl::nullopt;
}

std::string Device::ToString() const {
  return is_cpu() ? std::string("cpu") : absl::StrCat("cuda:", index);
}

}  // namespace syncline
