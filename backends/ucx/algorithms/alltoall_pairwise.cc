// Alltoall by pairwise exchange: in step s (1..P-1) rank r sends its block
// for r+s and receives the block from r-s. Every pair of ranks exchanges
// exactly once and each rank has one send and one receive in flight, so no
// rank is flooded, for any P.
#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildAlltoallPairwise(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, r = args.rank;
  ScheduleBuilder b("pairwise exchange", op.recv.dtype, SL_SUM);
  const size_t block = (op.send.count / P) * b.elem();
  const auto* in = static_cast<const uint8_t*>(op.send.data);
  auto* out = static_cast<uint8_t*>(op.recv.data);
  b.NewRound();
  b.Copy(out + r * block, in + r * block, block);
  for (int s = 1; s < P; ++s) {
    const int to = (r + s) % P, from = (r - s + P) % P;
    b.NewRound();
    b.Send(to, in + to * block, block, static_cast<uint32_t>(s));
    b.Recv(from, out + from * block, block, static_cast<uint32_t>(s));
  }
  return b.Finish();
}

}  // namespace syncline::ucx_backend
