// Reduce-scatter for small blocks: a recursive-doubling allreduce of the
// whole input in scratch, then this rank's block is kept. It moves P times
// more data than the ring but needs only ~log2(P) rounds, which is what
// matters while messages are latency-bound.
#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildReduceScatterRecursiveDoubling(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  ScheduleBuilder b("recursive doubling", op.recv.dtype, op.redop);
  const size_t es = b.elem(), n = op.recv.count, total = n * args.size;
  uint8_t* buf = b.AllocScratch(2 * total * es);
  uint8_t* tmp = buf + total * es;
  b.NewRound();
  b.Copy(buf, op.send.data, total * es);
  AppendRecursiveDoubling(b, buf, tmp, total, args.rank, args.size);
  b.NewRound();
  b.Copy(op.recv.data, buf + static_cast<size_t>(args.rank) * n * es, n * es);
  if (op.redop == SL_AVG) b.Divide(op.recv.data, n);
  return b.Finish();
}

}  // namespace syncline::ucx_backend
