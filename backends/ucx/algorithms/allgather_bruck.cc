// Allgather by Bruck's algorithm: recursive doubling of the gathered data
// that works for any P. In round k (distance d = 2^k) every rank sends the
// first min(d, P-d) blocks it holds to rank r-d and appends as many from
// rank r+d, so after ceil(log2 P) rounds it holds blocks r, r+1, ... in
// scratch; a final rotation puts them in rank order. Used for small blocks,
// where the round count, not the bytes, sets the time.
#include <algorithm>

#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildAllgatherBruck(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, r = args.rank;
  ScheduleBuilder b("bruck", op.recv.dtype, SL_SUM);
  const size_t block = op.send.count * b.elem();
  uint8_t* tmp = b.AllocScratch(block * P);
  b.NewRound();
  b.Copy(tmp, op.send.data, block);
  uint32_t step = 0;
  for (int d = 1; d < P; d <<= 1, ++step) {
    const size_t blocks = static_cast<size_t>(std::min(d, P - d));
    b.NewRound();
    b.Send((r - d + P) % P, tmp, blocks * block, step);
    b.Recv((r + d) % P, tmp + d * block, blocks * block, step);
  }
  b.NewRound();
  auto* out = static_cast<uint8_t*>(op.recv.data);
  for (int i = 0; i < P; ++i) b.Copy(out + ((r + i) % P) * block, tmp + i * block, block);
  return b.Finish();
}

}  // namespace syncline::ucx_backend
