// types.cc: names and sizes of the value types.
#include "syncline/types.h"

#include "absl/strings/str_cat.h"
#include "syncline/plugin_abi.h"

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

// The names are the C ABI's (plugin_abi.h), whose enums these mirror value
// for value.
static_assert(kNumDataTypes == SL_DTYPE_COUNT && kNumReduceOps == SL_REDOP_COUNT);
static_assert(static_cast<int>(DataType::kInt64) == SL_I64 &&
              static_cast<int>(DataType::kBFloat16) == SL_BF16 &&
              static_cast<int>(ReduceOp::kAvg) == SL_AVG);

const char* DataTypeName(DataType dtype) {
  const char* name = sl_dtype_name(static_cast<sl_dtype_t>(dtype));
  return name != nullptr ? name : "invalid-dtype";
}

const char* ReduceOpName(ReduceOp op) {
  const char* name = sl_redop_name(static_cast<sl_redop_t>(op));
  return name != nullptr ? name : "invalid-op";
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
