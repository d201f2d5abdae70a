// Broadcast by binomial tree: ceil(log2 P) levels. Relative to the root,
// rank v receives from v minus its lowest set bit, then sends to v + 2^k for
// every 2^k below that bit, largest first so the far subtrees start early.
// The message's step is the level (k), known to both ends.
#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildBroadcastBinomial(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, root = op.root;
  ScheduleBuilder b("binomial tree", op.recv.dtype, SL_SUM);
  const size_t bytes = op.recv.count * b.elem();
  const int vr = (args.rank - root + P) % P;
  auto real = [&](int v) { return (v + root) % P; };
  int mask = 1;
  uint32_t level = 0;
  while (mask < P) {
    if (vr & mask) {
      b.NewRound();
      b.Recv(real(vr - mask), op.recv.data, bytes, level);
      break;
    }
    mask <<= 1;
    ++level;
  }
  b.NewRound();
  for (mask >>= 1; mask > 0; mask >>= 1) {
    --level;
    if (vr + mask < P) b.Send(real(vr + mask), op.recv.data, bytes, level);
  }
  return b.Finish();
}

}  // namespace syncline::ucx_backend
