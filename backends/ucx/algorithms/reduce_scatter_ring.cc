// Reduce-scatter by ring, pipelined in segments: the first half of the
// ring allreduce (allreduce_ring.cc) on blocks of exactly recv.count
// elements. Partial sums live in two alternating scratch blocks (the send
// buffer is the caller's and recv holds one block only); the last step
// reduces straight into recv.
#include <algorithm>

#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildReduceScatterRing(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, r = args.rank;
  ScheduleBuilder b("ring", op.recv.dtype, op.redop);
  const size_t es = b.elem(), n = op.recv.count, block = n * es;
  const size_t seg = SegmentElems(*args.options, es);
  const size_t segments = std::max<size_t>(1, CeilDiv(n, seg));
  const size_t tmp_bytes = std::min(seg, n) * es;
  uint8_t* scratch = b.AllocScratch(tmp_bytes + 2 * block);
  uint8_t* tmp = scratch;
  uint8_t* partial[2] = {scratch + tmp_bytes, scratch + tmp_bytes + block};
  const auto* in = static_cast<const uint8_t*>(op.send.data);
  auto* out = static_cast<uint8_t*>(op.recv.data);
  const int left = (r - 1 + P) % P, right = (r + 1) % P;
  uint32_t step = 0;
  for (int s = 0; s < P - 1; ++s) {
    const int ks = (r - s - 1 + 2 * P) % P, kr = (r - s - 2 + 2 * P) % P;
    const uint8_t* src = s == 0 ? in + ks * block : partial[(s - 1) % 2];
    uint8_t* dst = s == P - 2 ? out : partial[s % 2];
    for (size_t j = 0; j < segments; ++j, ++step) {
      const size_t first = j * seg, cnt = std::min(seg, n - std::min(n, first));
      b.NewRound();
      b.Send(right, src + first * es, cnt * es, step);
      b.Recv(left, tmp, cnt * es, step);
      b.Reduce(dst + first * es, in + kr * block + first * es, tmp, cnt);
    }
  }
  if (op.redop == SL_AVG) b.Divide(out, n);
  return b.Finish();
}

}  // namespace syncline::ucx_backend
