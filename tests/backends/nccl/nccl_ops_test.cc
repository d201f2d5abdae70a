// Unit tests of the NCCL backend's op mapping and validation (ops.h), which
// need no GPU: what reaches NCCL, and what is refused before it with a
// message. The enum mappings are checked value by value because NCCL orders
// max before min, unlike the ABI.
#include <nccl.h>

#include <string>

#include "backends/nccl/ops.h"
#include "common/abi_op.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncline::nccl_backend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kDevice = 1;
int g_memory[64];  // stands in for device memory; never dereferenced

sl_buffer_t Cuda(size_t count, sl_dtype_t dtype = SL_F32, int device = kDevice,
                 void* data = g_memory) {
  return sl_buffer_t{data, count, dtype, SL_DEVICE_CUDA, device, nullptr};
}

sl_op_t Op(sl_op_kind_t kind, sl_buffer_t send, sl_buffer_t recv) {
  return test_util::MakeOp(kind, send, recv, 42);
}

sl_result_t Validate(const sl_op_t& op, std::string* message, int rank = 0,
                     int size = 4) {
  return ValidateOp(op, rank, size, kDevice, message);
}

TEST(NcclOps, MapsEveryDtype) {
  EXPECT_EQ(ToNcclType(SL_F32), ncclFloat32);
  EXPECT_EQ(ToNcclType(SL_F64), ncclFloat64);
  EXPECT_EQ(ToNcclType(SL_F16), ncclFloat16);
  EXPECT_EQ(ToNcclType(SL_BF16), ncclBfloat16);
  EXPECT_EQ(ToNcclType(SL_I8), ncclInt8);
  EXPECT_EQ(ToNcclType(SL_U8), ncclUint8);
  EXPECT_EQ(ToNcclType(SL_I32), ncclInt32);
  EXPECT_EQ(ToNcclType(SL_I64), ncclInt64);
  EXPECT_EQ(SupportedDtypeMask(), (1u << SL_DTYPE_COUNT) - 1);
}

TEST(NcclOps, MapsEveryReduction) {
  EXPECT_EQ(ToNcclOp(SL_SUM), ncclSum);
  EXPECT_EQ(ToNcclOp(SL_PROD), ncclProd);
  EXPECT_EQ(ToNcclOp(SL_MIN), ncclMin);
  EXPECT_EQ(ToNcclOp(SL_MAX), ncclMax);
  EXPECT_EQ(ToNcclOp(SL_AVG), ncclAvg);
}

TEST(NcclOps, AcceptsWellFormedOps) {
  std::string message;
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, Cuda(8), Cuda(8)), &message), SL_OK) << message;
  EXPECT_EQ(Validate(Op(SL_OP_ALLGATHER, Cuda(2), Cuda(8)), &message), SL_OK) << message;
  EXPECT_EQ(Validate(Op(SL_OP_REDUCE_SCATTER, Cuda(8), Cuda(2)), &message), SL_OK);
  EXPECT_EQ(Validate(Op(SL_OP_ALLTOALL, Cuda(8), Cuda(8, SL_F32, kDevice, g_memory + 8)),
                     &message),
            SL_OK)
      << message;
  EXPECT_EQ(Validate(Op(SL_OP_BARRIER, {}, {}), &message), SL_OK) << message;
  EXPECT_EQ(Validate(Op(SL_OP_SEND, Cuda(3), {}), &message), SL_OK) << message;
  EXPECT_EQ(Validate(Op(SL_OP_BROADCAST, {}, Cuda(3)), &message), SL_OK) << message;
  // A non-root's reduce has no recv buffer at all.
  sl_op_t reduce = Op(SL_OP_REDUCE, Cuda(8), {});
  reduce.root = 2;
  EXPECT_EQ(Validate(reduce, &message), SL_OK) << message;
}

TEST(NcclOps, RefusesHostBuffersWithAHint) {
  std::string message;
  sl_buffer_t host = Cuda(8);
  host.device = SL_DEVICE_CPU;
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, host, host), &message), SL_ERR_UNSUPPORTED);
  EXPECT_THAT(message, AllOf(HasSubstr("allreduce #42"), HasSubstr("host memory"),
                             HasSubstr("SYNCLINE_BACKEND=gloo")));
}

TEST(NcclOps, RefusesAnotherDevicesBuffer) {
  std::string message;
  EXPECT_EQ(
      Validate(Op(SL_OP_ALLREDUCE, Cuda(8, SL_F32, 0), Cuda(8, SL_F32, 0)), &message),
      SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(message, AllOf(HasSubstr("cuda:0"), HasSubstr("cuda:1")));
}

TEST(NcclOps, RefusesInPlaceAlltoall) {
  std::string message;
  EXPECT_EQ(Validate(Op(SL_OP_ALLTOALL, Cuda(8), Cuda(8)), &message),
            SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(message, AllOf(HasSubstr("alltoall #42"), HasSubstr("in place")));
}

TEST(NcclOps, RefusesBadShapesRootsPeersAndEnums) {
  std::string message;
  EXPECT_EQ(Validate(Op(SL_OP_ALLGATHER, Cuda(2), Cuda(7)), &message),
            SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("4 ranks"));
  sl_op_t bcast = Op(SL_OP_BROADCAST, {}, Cuda(3));
  bcast.root = 4;
  EXPECT_EQ(Validate(bcast, &message), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("root 4"));
  sl_op_t self = Op(SL_OP_SEND, Cuda(3), {});
  self.peer = 0;
  EXPECT_EQ(Validate(self, &message), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("peer 0"));
  sl_op_t redop = Op(SL_OP_ALLREDUCE, Cuda(8), Cuda(8));
  redop.redop = static_cast<sl_redop_t>(9);
  EXPECT_EQ(Validate(redop, &message), SL_ERR_INVALID_ARGUMENT);
  sl_op_t dtype = Op(SL_OP_ALLREDUCE, Cuda(8, static_cast<sl_dtype_t>(12)),
                     Cuda(8, static_cast<sl_dtype_t>(12)));
  EXPECT_EQ(Validate(dtype, &message), SL_ERR_INVALID_ARGUMENT);
  sl_op_t null_data = Op(SL_OP_ALLREDUCE, Cuda(8, SL_F32, kDevice, nullptr), Cuda(8));
  EXPECT_EQ(Validate(null_data, &message), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("null pointer"));
}

TEST(NcclOps, DataBufferIsRecvForRecvAndBroadcast) {
  const sl_op_t recv = Op(SL_OP_RECV, Cuda(1), Cuda(5));
  EXPECT_EQ(DataBuffer(recv).count, 5u);
  const sl_op_t bcast = Op(SL_OP_BROADCAST, Cuda(1), Cuda(6));
  EXPECT_EQ(DataBuffer(bcast).count, 6u);
  const sl_op_t gather = Op(SL_OP_ALLGATHER, Cuda(2), Cuda(8));
  EXPECT_EQ(DataBuffer(gather).count, 2u);
}

}  // namespace
}  // namespace syncline::nccl_backend
