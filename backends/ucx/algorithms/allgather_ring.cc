// Allgather by ring, pipelined in segments: in step s rank r forwards block
// r-s to r+1 and receives block r-s-1 from r-1 straight into place. Each
// rank sends and receives (P-1) blocks, the minimum, so it is the
// large-block algorithm.
#include <algorithm>

#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildAllgatherRing(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, r = args.rank;
  ScheduleBuilder b("ring", op.recv.dtype, SL_SUM);
  const size_t es = b.elem(), n = op.send.count, block = n * es;
  const size_t seg = SegmentElems(*args.options, es);
  const size_t segments = std::max<size_t>(1, CeilDiv(n, seg));
  auto* out = static_cast<uint8_t*>(op.recv.data);
  const int left = (r - 1 + P) % P, right = (r + 1) % P;
  b.NewRound();
  b.Copy(out + r * block, op.send.data, block);
  uint32_t step = 0;
  for (int s = 0; s < P - 1; ++s) {
    const int ks = (r - s + P) % P, kr = (r - s - 1 + P) % P;
    for (size_t j = 0; j < segments; ++j, ++step) {
      const size_t first = j * seg, cnt = std::min(seg, n - std::min(n, first));
      b.NewRound();
      b.Send(right, out + ks * block + first * es, cnt * es, step);
      b.Recv(left, out + kr * block + first * es, cnt * es, step);
    }
  }
  return b.Finish();
}

}  // namespace syncline::ucx_backend
