// Broadcast by a pipelined chain: ranks in order from the root pass the
// message down a line in segments of Options::chunk_bytes. In round t a rank
// forwards segment t-1 to its successor while it receives segment t from
// its predecessor, so after the pipeline fills every link is busy and the
// time approaches (bytes + (P-2) * segment) / bandwidth, against
// log2(P) * bytes / bandwidth for the binomial tree.
#include <algorithm>

#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildBroadcastChain(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, root = op.root;
  ScheduleBuilder b("pipelined chain", op.recv.dtype, SL_SUM);
  const size_t es = b.elem(), n = op.recv.count;
  const size_t seg = SegmentElems(*args.options, es);
  const size_t segments = CeilDiv(n, seg);
  const int vr = (args.rank - root + P) % P;
  const int parent = vr > 0 ? (args.rank - 1 + P) % P : -1;
  const int child = vr < P - 1 ? (args.rank + 1) % P : -1;
  auto* buf = static_cast<uint8_t*>(op.recv.data);
  auto seg_bytes = [&](size_t j) { return std::min(seg, n - j * seg) * es; };
  for (size_t t = 0; t <= segments; ++t) {
    b.NewRound();
    if (child >= 0 && t >= 1) {
      b.Send(child, buf + (t - 1) * seg * es, seg_bytes(t - 1),
             static_cast<uint32_t>(t - 1));
    }
    if (parent >= 0 && t < segments) {
      b.Recv(parent, buf + t * seg * es, seg_bytes(t), static_cast<uint32_t>(t));
    }
  }
  return b.Finish();
}

}  // namespace syncline::ucx_backend
