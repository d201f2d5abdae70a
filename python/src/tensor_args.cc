// tensor_args.cc: argument checks and conversions (see tensor_args.h).
#include "tensor_args.h"

#include <c10/util/Exception.h>

namespace syncline::torch_backend {
namespace {

constexpr const char* kSupportedDtypes =
    "float32, float64, float16, bfloat16, int8, uint8, int32, int64 and bool";

const char* RedOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

DataType DataTypeFor(at::ScalarType dtype, const char* op_name) {
  switch (dtype) {
    case at::kFloat: return DataType::kFloat32;
    case at::kDouble: return DataType::kFloat64;
    case at::kHalf: return DataType::kFloat16;
    case at::kBFloat16: return DataType::kBFloat16;
    case at::kChar: return DataType::kInt8;
    case at::kByte: return DataType::kUInt8;
    case at::kBool: return DataType::kUInt8;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    default:
      TORCH_CHECK(false, "syncline: ", op_name, " on dtype ", c10::toString(dtype),
                  " is not supported; the syncline backend supports ",
                  kSupportedDtypes);
  }
}

ReduceOp ReduceOpFor(const c10d::ReduceOp& op, at::ScalarType dtype,
                     const char* op_name) {
  const bool is_bool = dtype == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return is_bool ? ReduceOp::kMax : ReduceOp::kSum;
    case c10d::ReduceOp::PRODUCT: return is_bool ? ReduceOp::kMin : ReduceOp::kProd;
    case c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return ReduceOp::kMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!is_bool, "syncline: ", op_name,
                  " with ReduceOp.AVG on bool tensors is not supported");
      return ReduceOp::kAvg;
    default:
      TORCH_CHECK(false, "syncline: ", op_name, " with ReduceOp.",
                  RedOpName(op.op_),
                  " is not supported; the syncline backend reduces with SUM, "
                  "AVG, PRODUCT, MIN and MAX (no bitwise ops, no PREMUL_SUM)");
  }
}

void CheckTensor(const at::Tensor& t, const char* op_name) {
  TORCH_CHECK(t.defined(), "syncline: ", op_name, " got an undefined tensor");
  TORCH_CHECK(!t.is_sparse(), "syncline: ", op_name,
              " on sparse tensors is not supported by the syncline backend");
  TORCH_CHECK(t.layout() == at::kStrided, "syncline: ", op_name,
              " supports only strided (dense) tensors, not layout ", t.layout());
  TORCH_CHECK(t.is_cpu(), "syncline: ", op_name, " on ", t.device().str(),
              " tensors is not supported yet; the syncline PyTorch backend "
              "handles CPU tensors");
  DataTypeFor(t.scalar_type(), op_name);
}

const at::Tensor& SingleTensor(const std::vector<at::Tensor>& tensors,
                               const char* op_name) {
  TORCH_CHECK(tensors.size() == 1, "syncline: ", op_name,
              " takes exactly one tensor per call, got ", tensors.size());
  CheckTensor(tensors[0], op_name);
  return tensors[0];
}

void CheckSameShape(const std::vector<at::Tensor>& tensors,
                    const at::Tensor& like, const char* op_name) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    CheckTensor(tensors[i], op_name);
    TORCH_CHECK(tensors[i].scalar_type() == like.scalar_type(), "syncline: ",
                op_name, ": tensor ", i, " has dtype ", tensors[i].scalar_type(),
                ", expected ", like.scalar_type());
    TORCH_CHECK(tensors[i].numel() == like.numel(), "syncline: ", op_name,
                ": tensor ", i, " has ", tensors[i].numel(),
                " elements, expected ", like.numel());
  }
}

std::vector<at::Tensor> RankBlocks(const std::vector<std::vector<at::Tensor>>& lists,
                                   const at::Tensor& like, int size, bool held,
                                   const char* op_name) {
  if (!held) {
    TORCH_CHECK(lists.empty() || (lists.size() == 1 && lists[0].empty()), "syncline: ",
                op_name, " takes a list of tensors on the root rank only");
    return {};
  }
  TORCH_CHECK(lists.size() == 1 && static_cast<int>(lists[0].size()) == size, "syncline: ",
              op_name, " needs one list of ", size, " tensors (one per rank)");
  CheckSameShape(lists[0], like, op_name);
  return lists[0];
}

void CheckFlatBlocks(const at::Tensor& whole, const at::Tensor& block, int size,
                     const char* whole_name, const char* op_name) {
  CheckTensor(whole, op_name);
  CheckTensor(block, op_name);
  TORCH_CHECK(whole.scalar_type() == block.scalar_type() &&
                  whole.numel() == size * block.numel(),
              "syncline: ", op_name, " needs an ", whole_name, " of ", size, " x ",
              block.numel(), " elements of ", block.scalar_type(), ", got ", whole.numel(),
              " of ", whole.scalar_type());
}

BufferView ViewOf(const at::Tensor& contiguous) {
  return View(contiguous.data_ptr(), static_cast<size_t>(contiguous.numel()),
              DataTypeFor(contiguous.scalar_type(), "view"));
}

absl::Duration TimeoutFrom(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return absl::ZeroDuration();
  return absl::Milliseconds(timeout.count());
}

}  // namespace syncline::torch_backend
