// abi_op.h: sl_op_t values for unit tests of code that checks or maps ops
// (the plugin SDK's validation, a backend's op mapping).
#ifndef SYNCLINE_TESTS_COMMON_ABI_OP_H_
#define SYNCLINE_TESTS_COMMON_ABI_OP_H_

#include <cstdint>

#include "syncline/plugin_abi.h"

namespace syncline::test_util {

// An op of `kind` over `send` and `recv`, sequence number `seq`, reducing
// with sum, root 0, peer 1.
inline sl_op_t MakeOp(sl_op_kind_t kind, sl_buffer_t send, sl_buffer_t recv,
                      uint64_t seq) {
  sl_op_t op = sl_op_init(kind);
  op.seq = seq;
  op.send = send;
  op.recv = recv;
  op.redop = SL_SUM;
  op.peer = 1;
  return op;
}

}  // namespace syncline::test_util

#endif  // SYNCLINE_TESTS_COMMON_ABI_OP_H_
