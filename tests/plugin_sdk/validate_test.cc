// Tests of the plugin SDK's one op validation (validate.h): what every
// backend refuses, with which code and which words, against the buffer
// table of plugin_abi.h.
#include "syncline/plugin_sdk/validate.h"

#include <string>

#include "common/abi_op.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncline::backend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

int g_memory[64];
const SlOpRules kCpu = {"cpuonly", SL_DEVICE_CPU, -1, "try SYNCLINE_BACKEND=other"};

sl_buffer_t Cpu(size_t count, sl_dtype_t dtype = SL_F32, void* data = g_memory) {
  return sl_buffer_t{data, count, dtype, SL_DEVICE_CPU, 0, nullptr};
}

sl_op_t Op(sl_op_kind_t kind, sl_buffer_t send, sl_buffer_t recv) {
  return syncline::test_util::MakeOp(kind, send, recv, 7);
}

sl_result_t Validate(const sl_op_t& op, std::string* why, int rank = 0, int size = 4,
                     const SlOpRules& rules = kCpu) {
  return SlValidateOp(op, rank, size, rules, why);
}

TEST(SlValidateOp, AcceptsEveryShapeOfTheBufferTable) {
  std::string why;
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, Cpu(8), Cpu(8)), &why), SL_OK) << why;
  EXPECT_EQ(Validate(Op(SL_OP_ALLGATHER, Cpu(2), Cpu(8)), &why), SL_OK) << why;
  EXPECT_EQ(Validate(Op(SL_OP_REDUCE_SCATTER, Cpu(8), Cpu(2)), &why), SL_OK) << why;
  EXPECT_EQ(Validate(Op(SL_OP_ALLTOALL, Cpu(8), Cpu(8)), &why), SL_OK) << why;
  EXPECT_EQ(Validate(Op(SL_OP_BARRIER, {}, {}), &why), SL_OK) << why;
  EXPECT_EQ(Validate(Op(SL_OP_SEND, Cpu(3), {}), &why), SL_OK) << why;
  EXPECT_EQ(Validate(Op(SL_OP_BROADCAST, {}, Cpu(3)), &why), SL_OK) << why;
  sl_op_t reduce = Op(SL_OP_REDUCE, Cpu(8), {});  // a non-root has no recv
  reduce.root = 2;
  EXPECT_EQ(Validate(reduce, &why), SL_OK) << why;
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, Cpu(0, SL_F32, nullptr), Cpu(0, SL_F32, nullptr)),
                     &why),
            SL_OK)
      << why;
}

TEST(SlValidateOp, NamesTheOpAndWhatIsWrong) {
  std::string why;
  EXPECT_EQ(Validate(Op(SL_OP_ALLGATHER, Cpu(2), Cpu(7)), &why), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, AllOf(HasSubstr("allgather #7"), HasSubstr("send has 2 and recv 7"),
                         HasSubstr("4 ranks")));
  sl_op_t bcast = Op(SL_OP_BROADCAST, {}, Cpu(3));
  bcast.root = 4;
  EXPECT_EQ(Validate(bcast, &why), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, AllOf(HasSubstr("broadcast #7"), HasSubstr("root 4"), HasSubstr("0..3")));
  sl_op_t self = Op(SL_OP_SEND, Cpu(3), {});
  self.peer = 0;
  self.seq = SL_SEQ_P2P_BIT | 2;
  EXPECT_EQ(Validate(self, &why), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, AllOf(HasSubstr("send p2p#2"), HasSubstr("peer 0")));
  sl_op_t redop = Op(SL_OP_ALLREDUCE, Cpu(8), Cpu(8));
  redop.redop = static_cast<sl_redop_t>(9);
  EXPECT_EQ(Validate(redop, &why), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, HasSubstr("invalid reduce op 9"));
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, Cpu(8, static_cast<sl_dtype_t>(12)),
                        Cpu(8, static_cast<sl_dtype_t>(12))),
                     &why),
            SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, HasSubstr("invalid dtype 12"));
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, Cpu(8, SL_F32, nullptr), Cpu(8)), &why),
            SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, HasSubstr("send buffer has 8 elements but a null pointer"));
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, Cpu(8), Cpu(8, SL_F64)), &why),
            SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, HasSubstr("send is f32 but recv is f64"));
  sl_op_t kind = Op(static_cast<sl_op_kind_t>(SL_OP_KIND_COUNT), {}, {});
  EXPECT_EQ(Validate(kind, &why), SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, HasSubstr("unknown op kind 9"));
}

TEST(SlValidateOp, ADeviceTheBackendLacksIsUnsupportedWithTheHint) {
  std::string why;
  sl_buffer_t cuda = Cpu(8);
  cuda.device = SL_DEVICE_CUDA;
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, cuda, cuda), &why), SL_ERR_UNSUPPORTED);
  EXPECT_THAT(why, AllOf(HasSubstr("allreduce #7"), HasSubstr("CUDA memory"),
                         HasSubstr("cpuonly backend moves CPU buffers only"),
                         HasSubstr("try SYNCLINE_BACKEND=other")));
}

TEST(SlValidateOp, ADeviceIndexRuleNamesBothDevices) {
  const SlOpRules cuda1 = {"gpuonly", SL_DEVICE_CUDA, 1, "use a CPU backend"};
  sl_buffer_t on0 = Cpu(8);
  on0.device = SL_DEVICE_CUDA;
  std::string why;
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, on0, on0), &why, 0, 4, cuda1),
            SL_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(why, AllOf(HasSubstr("cuda:0"), HasSubstr("cuda:1")));
  EXPECT_EQ(Validate(Op(SL_OP_ALLREDUCE, Cpu(8), Cpu(8)), &why, 0, 4, cuda1),
            SL_ERR_UNSUPPORTED);
  EXPECT_THAT(why, HasSubstr("host memory"));
}

TEST(AbiNames, OneTableForKindsDtypesAndReduceOps) {
  EXPECT_STREQ(sl_op_kind_name(SL_OP_REDUCE_SCATTER), "reduce_scatter");
  EXPECT_STREQ(sl_dtype_name(SL_BF16), "bf16");
  EXPECT_STREQ(sl_redop_name(SL_AVG), "avg");
  EXPECT_EQ(sl_op_kind_name(SL_OP_KIND_COUNT), nullptr);
  EXPECT_EQ(sl_dtype_name(SL_DTYPE_COUNT), nullptr);
  EXPECT_EQ(sl_redop_name(SL_REDOP_COUNT), nullptr);
  for (int k = 0; k < SL_OP_KIND_COUNT; ++k) {
    EXPECT_NE(sl_op_kind_name(static_cast<sl_op_kind_t>(k)), nullptr) << k;
  }
  for (int d = 0; d < SL_DTYPE_COUNT; ++d) {
    EXPECT_NE(sl_dtype_name(static_cast<sl_dtype_t>(d)), nullptr) << d;
  }
}

}  // namespace
}  // namespace syncline::backend
