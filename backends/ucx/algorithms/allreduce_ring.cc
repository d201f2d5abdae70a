// Allreduce by ring reduce-scatter then ring allgather, pipelined in
// segments: bandwidth-optimal (each rank sends and receives 2(P-1)/P of the
// vector), so it is the large-message algorithm.
//
// The vector is cut into P nearly equal blocks and each block into segments
// of at most Options::chunk_bytes. In reduce-scatter step s, rank r sends
// block r-s-1 to r+1 and receives block r-s-2 from r-1, adding its own
// contribution; after P-1 steps it holds block r fully reduced. The
// allgather then passes the finished blocks around the ring, received
// straight into place. One segment is in flight per round, so the receive
// buffer (one segment of scratch) stays in cache for the reduction that
// follows. Step numbers are the global round index, identical on both ends
// of every message.
#include <algorithm>

#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {
namespace {

// Elements [j*seg, (j+1)*seg) of a block of `count`, clipped.
size_t SegCount(size_t count, size_t seg, size_t j) {
  const size_t first = j * seg;
  return first >= count ? 0 : std::min(seg, count - first);
}

}  // namespace

Schedule BuildAllreduceRing(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const int P = args.size, r = args.rank;
  ScheduleBuilder b("ring", op.recv.dtype, op.redop);
  const size_t es = b.elem(), n = op.recv.count;
  const size_t seg = SegmentElems(*args.options, es);
  const size_t max_block = BlockCount(n, P, 0);
  const size_t segments = std::max<size_t>(1, CeilDiv(max_block, seg));
  uint8_t* tmp = b.AllocScratch(std::min(seg, max_block) * es);
  const auto* in = static_cast<const uint8_t*>(op.send.data);
  auto* out = static_cast<uint8_t*>(op.recv.data);
  const int left = (r - 1 + P) % P, right = (r + 1) % P;
  uint32_t step = 0;

  for (int s = 0; s < P - 1; ++s) {
    const int ks = (r - s - 1 + 2 * P) % P, kr = (r - s - 2 + 2 * P) % P;
    // Step 0 sends our own input; later steps forward what we reduced.
    const uint8_t* src = s == 0 ? in : out;
    for (size_t j = 0; j < segments; ++j, ++step) {
      const size_t off_s = (BlockOffset(n, P, ks) + j * seg) * es;
      const size_t off_r = (BlockOffset(n, P, kr) + j * seg) * es;
      const size_t cnt_s = SegCount(BlockCount(n, P, ks), seg, j);
      const size_t cnt_r = SegCount(BlockCount(n, P, kr), seg, j);
      b.NewRound();
      b.Send(right, src + off_s, cnt_s * es, step);
      b.Recv(left, tmp, cnt_r * es, step);
      b.Reduce(out + off_r, in + off_r, tmp, cnt_r);
    }
  }
  // Finish AVG on the one block this rank owns, before it is shared.
  if (op.redop == SL_AVG) {
    b.Divide(out + BlockOffset(n, P, r) * es, BlockCount(n, P, r));
  }
  for (int s = 0; s < P - 1; ++s) {
    const int ks = (r - s + P) % P, kr = (r - s - 1 + P) % P;
    for (size_t j = 0; j < segments; ++j, ++step) {
      b.NewRound();
      b.Send(right, out + (BlockOffset(n, P, ks) + j * seg) * es,
             SegCount(BlockCount(n, P, ks), seg, j) * es, step);
      b.Recv(left, out + (BlockOffset(n, P, kr) + j * seg) * es,
             SegCount(BlockCount(n, P, kr), seg, j) * es, step);
    }
  }
  return b.Finish();
}

}  // namespace syncline::ucx_backend
