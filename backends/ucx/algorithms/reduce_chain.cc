// Reduce by a pipelined chain toward the root: the mirror of
// broadcast_chain.cc. The last rank of the line sends its input segment by
// segment; every other rank adds its own input to each segment from its
// successor and forwards the sum one round later, overlapping the
// reduction of segment t with the transfer of segment t-1. The root writes
// the sums (and the AVG division) straight into recv.
#include <algorithm>

#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildReduceChain(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, root = op.root;
  ScheduleBuilder b("pipelined chain", op.send.dtype, op.redop);
  const size_t es = b.elem(), n = op.send.count;
  const size_t seg = SegmentElems(*args.options, es);
  const size_t segments = CeilDiv(n, seg);
  const int vr = (args.rank - root + P) % P;
  const int parent = vr > 0 ? (args.rank - 1 + P) % P : -1;
  const int child = vr < P - 1 ? (args.rank + 1) % P : -1;
  const auto* in = static_cast<const uint8_t*>(op.send.data);
  auto seg_count = [&](size_t j) { return std::min(seg, n - j * seg); };
  if (child < 0) {  // the far end: its input is the partial sum
    for (size_t t = 0; t < segments; ++t) {
      b.NewRound();
      b.Send(parent, in + t * seg * es, seg_count(t) * es, static_cast<uint32_t>(t));
    }
    return b.Finish();
  }
  const size_t tmp_bytes = std::min(seg, n) * es;
  uint8_t* scratch = b.AllocScratch(tmp_bytes + (parent >= 0 ? n * es : 0));
  uint8_t* tmp = scratch;
  uint8_t* acc = parent >= 0 ? scratch + tmp_bytes : static_cast<uint8_t*>(op.recv.data);
  for (size_t t = 0; t <= segments; ++t) {
    b.NewRound();
    if (parent >= 0 && t >= 1) {
      b.Send(parent, acc + (t - 1) * seg * es, seg_count(t - 1) * es,
             static_cast<uint32_t>(t - 1));
    }
    if (t < segments) {
      const size_t off = t * seg * es;
      b.Recv(child, tmp, seg_count(t) * es, static_cast<uint32_t>(t));
      b.Reduce(acc + off, in + off, tmp, seg_count(t));
      if (parent < 0 && op.redop == SL_AVG) b.Divide(acc + off, seg_count(t));
    }
  }
  return b.Finish();
}

}  // namespace syncline::ucx_backend
