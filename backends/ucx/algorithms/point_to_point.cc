// Send and recv: one transfer each, tagged with the caller's tag instead of
// a collective sequence number (see tag.h), so they match whatever the
// collectives around them do. A zero-count message is complete at once on
// both ends.
#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildPointToPoint(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const bool send = op.kind == SL_OP_SEND;
  const sl_buffer_t& buffer = send ? op.send : op.recv;
  ScheduleBuilder b(send ? "send" : "recv", buffer.dtype, SL_SUM);
  const size_t bytes = buffer.count * b.elem();
  b.NewRound();
  if (send) {
    b.Send(op.peer, buffer.data, bytes, 0);
  } else {
    b.Recv(op.peer, buffer.data, bytes, 0);
  }
  return b.Finish();
}

// One rank: every collective is a copy (or nothing).
Schedule BuildLocal(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  ScheduleBuilder b("local", op.recv.dtype, op.redop);
  b.NewRound();
  switch (op.kind) {
    case SL_OP_ALLREDUCE:
    case SL_OP_REDUCE:
    case SL_OP_ALLGATHER:
    case SL_OP_REDUCE_SCATTER:
    case SL_OP_ALLTOALL:
      if (op.recv.data != nullptr && op.send.data != nullptr) {
        b.Copy(op.recv.data, op.send.data, op.recv.count * b.elem());
      }
      break;
    default:
      break;
  }
  return b.Finish();
}

}  // namespace syncline::ucx_backend
