// Barrier by dissemination: in round k every rank signals r + 2^k and waits
// for r - 2^k. After ceil(log2 P) rounds each rank has heard, directly or
// transitively, from every other, for any P. The one-byte token exists
// because the schedule drops empty transfers.
#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {

Schedule BuildBarrierDissemination(const AlgoArgs& args) {
  const int P = args.size, r = args.rank;
  ScheduleBuilder b("dissemination", SL_U8, SL_SUM);
  uint8_t* token = b.AllocScratch(2);
  token[0] = 1;
  uint32_t step = 0;
  for (int d = 1; d < P; d <<= 1, ++step) {
    b.NewRound();
    b.Send((r + d) % P, token, 1, step);
    b.Recv((r - d + P) % P, token + 1, 1, step);
  }
  return b.Finish();
}

}  // namespace syncline::ucx_backend
