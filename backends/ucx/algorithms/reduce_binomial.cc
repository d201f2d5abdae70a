// Reduce by binomial tree: the mirror of broadcast_binomial.cc. Relative to
// the root, rank v receives and folds in the partial result of v + 2^k for
// each 2^k below its lowest set bit (in increasing k), then sends its
// partial result to v minus that bit. Non-roots accumulate in scratch, so
// their recv buffers are never written.
#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildReduceBinomial(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, root = op.root;
  const bool is_root = args.rank == root;
  ScheduleBuilder b("binomial tree", op.send.dtype, op.redop);
  const size_t n = op.send.count, bytes = n * b.elem();
  uint8_t* scratch = b.AllocScratch(is_root ? bytes : 2 * bytes);
  uint8_t* tmp = scratch;
  uint8_t* acc = is_root ? static_cast<uint8_t*>(op.recv.data) : scratch + bytes;
  const int vr = (args.rank - root + P) % P;
  auto real = [&](int v) { return (v + root) % P; };
  b.NewRound();
  b.Copy(acc, op.send.data, bytes);
  uint32_t level = 0;
  for (int mask = 1; mask < P; mask <<= 1, ++level) {
    if (vr & mask) {
      b.NewRound();
      b.Send(real(vr - mask), acc, bytes, level);
      break;
    }
    if (vr + mask < P) {
      b.NewRound();
      b.Recv(real(vr + mask), tmp, bytes, level);
      b.Reduce(acc, acc, tmp, n);
    }
  }
  if (is_root && op.redop == SL_AVG) b.Divide(acc, n);
  return b.Finish();
}

}  // namespace syncline::ucx_backend
