// Allreduce by recursive doubling: log2(P) rounds in which every rank
// exchanges its whole vector with the partner whose rank differs in one bit
// and reduces. Latency-optimal (log2 P messages per rank), but each round
// moves the whole vector, so it is used for small messages only.
//
// Non-power-of-two P: with 2^k <= P < 2^(k+1) and rem = P - 2^k, ranks
// 0..2*rem-1 pair up first (even sends to odd, which reduces), the odd ones
// and ranks >= 2*rem run the 2^k algorithm, and the result is sent back to
// the even ones.
#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

void AppendRecursiveDoubling(ScheduleBuilder& b, uint8_t* buf, uint8_t* tmp,
                             size_t count, int rank, int size) {
  const size_t bytes = count * b.elem();
  int pow2 = 1;
  while (pow2 * 2 <= size) pow2 *= 2;
  const int rem = size - pow2;
  int vrank;
  uint32_t step = 0;
  if (rank < 2 * rem) {
    b.NewRound();
    if (rank % 2 == 0) {
      b.Send(rank + 1, buf, bytes, step);
      vrank = -1;  // sits out the doubling
    } else {
      b.Recv(rank - 1, tmp, bytes, step);
      b.Reduce(buf, tmp, buf, count);  // lower rank's data first
      vrank = rank / 2;
    }
  } else {
    vrank = rank - rem;
  }
  ++step;
  auto real = [rem](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  for (int mask = 1; mask < pow2; mask <<= 1, ++step) {
    if (vrank < 0) continue;
    const int peer = real(vrank ^ mask);
    b.NewRound();
    b.Send(peer, buf, bytes, step);
    b.Recv(peer, tmp, bytes, step);
    if (peer < rank) {
      b.Reduce(buf, tmp, buf, count);
    } else {
      b.Reduce(buf, buf, tmp, count);
    }
  }
  if (rank < 2 * rem) {
    b.NewRound();
    if (rank % 2 == 0) {
      b.Recv(rank + 1, buf, bytes, step);
    } else {
      b.Send(rank - 1, buf, bytes, step);
    }
  }
}

Schedule BuildAllreduceRecursiveDoubling(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  ScheduleBuilder b("recursive doubling", op.recv.dtype, op.redop);
  const size_t n = op.recv.count, bytes = n * b.elem();
  uint8_t* tmp = b.AllocScratch(bytes);
  auto* buf = static_cast<uint8_t*>(op.recv.data);
  b.NewRound();
  b.Copy(buf, op.send.data, bytes);
  AppendRecursiveDoubling(b, buf, tmp, n, args.rank, args.size);
  if (op.redop == SL_AVG) b.Divide(buf, n);
  return b.Finish();
}

}  // namespace syncline::ucx_backend
