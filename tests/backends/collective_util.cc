#include "backends/collective_util.h"

#include <cmath>
#include <cstring>

#include "gtest/gtest.h"

namespace syncline::testing {

std::unique_ptr<Communicator> ConnectForTest(const std::string& backend,
                                             absl::Duration timeout) {
  CommunicatorOptions options;
  options.backend = backend;
  options.timeout = timeout;
  auto comm = Communicator::Create(options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

namespace {

// Independent of syncline/plugin_sdk/half.h on purpose: these only need to be
// right for the exactly representable inputs the tests use (and to decode
// any f16/bf16 the backend returns), so they are written the simple way.
uint16_t EncodeHalfExact(float f) {
  if (f == 0.0f) return std::signbit(f) ? 0x8000 : 0;
  int exp = 0;
  const float mant = std::frexp(std::fabs(f), &exp);  // f = mant * 2^exp
  // Normal f16: value = (1 + m/1024) * 2^(e-15), with mant in [0.5, 1).
  const int e = exp - 1 + 15;
  const uint16_t m = static_cast<uint16_t>(std::lround((mant * 2 - 1) * 1024));
  return static_cast<uint16_t>((f < 0 ? 0x8000 : 0) | (e << 10) | m);
}

double DecodeHalf(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  double v;
  if (e == 0) {
    v = std::ldexp(m, -24);
  } else if (e == 31) {
    v = m == 0 ? HUGE_VAL : NAN;
  } else {
    v = std::ldexp(1024 + m, e - 25);
  }
  return (h & 0x8000) ? -v : v;
}

uint16_t EncodeBFloat16Exact(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);  // exact inputs: no rounding
}

double DecodeBFloat16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

bool IsFloat(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat64 ||
         dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

}  // namespace

std::vector<size_t> TestCounts(DataType dtype) {
  return {0, 1, 1001, (size_t{2} << 20) / DataTypeSize(dtype) + 3};
}

TypedBuffer::TypedBuffer(DataType dtype, size_t count)
    : dtype_(dtype),
      count_(count),
      elem_(DataTypeSize(dtype)),
      bytes_(count * DataTypeSize(dtype) + 1, 0xA5) {}  // +1: never empty

BufferView TypedBuffer::Slice(size_t offset, size_t count) {
  return syncline::View(bytes_.data() + offset * elem_, count, dtype_);
}

void TypedBuffer::Set(size_t i, double value) {
  uint8_t* p = bytes_.data() + i * elem_;
  switch (dtype_) {
    case DataType::kFloat32: {
      float v = static_cast<float>(value);
      std::memcpy(p, &v, 4);
      break;
    }
    case DataType::kFloat64:
      std::memcpy(p, &value, 8);
      break;
    case DataType::kFloat16: {
      uint16_t v = EncodeHalfExact(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      break;
    }
    case DataType::kBFloat16: {
      uint16_t v = EncodeBFloat16Exact(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      break;
    }
    case DataType::kInt8: {
      int8_t v = static_cast<int8_t>(value);
      std::memcpy(p, &v, 1);
      break;
    }
    case DataType::kUInt8: {
      uint8_t v = static_cast<uint8_t>(value);
      std::memcpy(p, &v, 1);
      break;
    }
    case DataType::kInt32: {
      int32_t v = static_cast<int32_t>(value);
      std::memcpy(p, &v, 4);
      break;
    }
    case DataType::kInt64: {
      int64_t v = static_cast<int64_t>(value);
      std::memcpy(p, &v, 8);
      break;
    }
  }
}

double TypedBuffer::Get(size_t i) const {
  const uint8_t* p = bytes_.data() + i * elem_;
  switch (dtype_) {
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DataType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return DecodeHalf(v);
    }
    case DataType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return DecodeBFloat16(v);
    }
    case DataType::kInt8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case DataType::kUInt8: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
  }
  return NAN;
}

double InputValue(DataType dtype, ReduceOp op, int rank, size_t index) {
  const uint64_t h = static_cast<uint64_t>(rank) * 131 + index * 31 + (index >> 7) * 17;
  if (op == ReduceOp::kProd) {
    // Products over four ranks stay within int8 and within 8 significant
    // bits, so they are exact in every dtype.
    static const double kFloat[] = {1, -1, 2, -0.5, 0.5, 1.5};
    static const double kSigned[] = {1, -1, 2, -2, 3, 1};
    static const double kUnsigned[] = {1, 2, 3, 1};
    if (IsFloat(dtype)) return kFloat[h % 6];
    if (dtype == DataType::kUInt8) return kUnsigned[h % 4];
    return kSigned[h % 6];
  }
  switch (dtype) {
    case DataType::kInt8:
      return static_cast<double>(h % 41) - 20;
    case DataType::kUInt8:
      return static_cast<double>(h % 60);
    case DataType::kInt32:
      return static_cast<double>(h % 2001) - 1000;
    case DataType::kInt64:  // beyond 32 bits, still exact in a double
      return (static_cast<double>(h % 2001) - 1000) * 4294967296.0 + 7;
    default:
      return (static_cast<double>(h % 33) - 16) * 0.25;
  }
}

void FillInput(TypedBuffer& buffer, ReduceOp op, int rank, size_t first) {
  for (size_t i = 0; i < buffer.count(); ++i) {
    buffer.Set(i, InputValue(buffer.dtype(), op, rank, first + i));
  }
}

double ExpectedReduce(DataType dtype, ReduceOp op, int size, size_t index) {
  double acc = InputValue(dtype, op, 0, index);
  for (int r = 1; r < size; ++r) {
    const double v = InputValue(dtype, op, r, index);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = v < acc ? v : acc;
        break;
      case ReduceOp::kMax:
        acc = v > acc ? v : acc;
        break;
    }
  }
  if (op == ReduceOp::kAvg) {
    acc = IsFloat(dtype) ? acc / size : std::trunc(acc / size);
  }
  return acc;
}

double Tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 1e-6;
    case DataType::kFloat64:
      return 1e-12;
    case DataType::kFloat16:
      return 1.0 / 1024;  // one f16 ulp, relative
    case DataType::kBFloat16:
      return 1.0 / 128;  // one bf16 ulp, relative
    default:
      return 0.0;
  }
}

}  // namespace syncline::testing
