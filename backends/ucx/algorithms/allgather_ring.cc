// Allgather by ring: in step s rank r forwards block r-s to r+1 and
// receives block r-s-1 from r-1 straight into place. Each rank sends and
// receives (P-1) blocks, the minimum, so it is the large-block algorithm.
//
// Step 0 sends this rank's own block straight from the input, as one
// message, in the same round as the copy of that block into place (the copy
// runs once the round's transfers are done; nothing of this round reads or
// writes its destination). Steps from 1 on forward received blocks in
// segments of Options::chunk_bytes, one per round. On 2 ranks the op is
// therefore one exchange and one copy: cut into segments, each its own
// round, it had taken one round trip per segment, and copied before
// sending (2.3x raw UCP's time at 64 KiB and at 16 MiB, bench/README.md).
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
  uint32_t step = 0;
  if (P > 1) {
    b.Send(right, op.send.data, block, step);
    b.Recv(left, out + left * block, block, step);
    ++step;
  }
  b.Copy(out + r * block, op.send.data, block);
  for (int s = 1; s < P - 1; ++s) {
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
