// algorithms.h: the UCX backend's collective algorithms, one file each.
//
// Each Build* function turns one validated sl_op_t into a Schedule
// (schedule.h) for this rank; nothing here touches UCP. SelectSchedule()
// (select.cc) picks the algorithm from the op, the message size, the world
// size and the thresholds in Options; unset thresholds follow the world
// size (DefaultSmallMax, documented in select.cc).
//
// Conventions every builder follows:
//  - buffers and counts follow plugin_abi.h's table; the caller's send
//    buffer is never written, and a reduce writes recv on the root only;
//  - results are identical on every rank: each element's reduction happens
//    in one place (or symmetrically with commutative IEEE ops) and is then
//    copied, never recomputed in another order;
//  - AVG is SUM followed by one division of the final values;
//  - any world size works; power-of-two-only algorithms fold the extra
//    ranks in first.
//
// Thread safety: pure functions of their arguments.
#ifndef SYNCLINE_BACKENDS_UCX_ALGORITHMS_ALGORITHMS_H_
#define SYNCLINE_BACKENDS_UCX_ALGORITHMS_ALGORITHMS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/ucx/options.h"
#include "backends/ucx/schedule.h"
#include "syncline/plugin_abi.h"

namespace syncline::ucx_backend {

struct AlgoArgs {
  const sl_op_t* op = nullptr;
  int rank = 0;
  int size = 1;
  const Options* options = nullptr;
  // More ranks of this communicator on this host than CPUs this process may
  // run on: ranks time-share cores, which moves the switch points
  // (RanksOversubscribe, select.cc).
  bool oversubscribed = false;
};

// ValidateOp()
//
// The plugin SDK's SlValidateOp (validate.h) with UCX's rules: CPU buffers
// only. Returns SL_OK, or an error code with `*message` naming the op and
// what is wrong.
sl_result_t ValidateOp(const sl_op_t& op, int rank, int size, std::string* message);

// SelectSchedule()
//
// The schedule this rank runs for `args.op` (validated), with the chosen
// algorithm's name in Schedule::algorithm.
Schedule SelectSchedule(const AlgoArgs& args);

// DefaultSmallMax() / SmallMax()
//
// The switch point of `kind` (allreduce, broadcast, reduce, allgather,
// reduce_scatter; 0 for the others) in bytes of one rank's buffer: at or
// below it the latency algorithm runs. DefaultSmallMax is the built-in
// value for `world_size` and whether its ranks share cores (select.cc says
// where each number comes from); SmallMax is the one in `options` when set
// there, else the default.
size_t DefaultSmallMax(sl_op_kind_t kind, int world_size, bool oversubscribed);
size_t SmallMax(const Options& options, sl_op_kind_t kind, int world_size,
                bool oversubscribed);

// RanksOversubscribe()
//
// True when `ranks_on_host` ranks cannot each have a CPU of their own: more
// of them than the CPUs in this process's affinity mask.
bool RanksOversubscribe(int ranks_on_host);

Schedule BuildAllreduceRecursiveDoubling(const AlgoArgs& args);
Schedule BuildAllreduceRing(const AlgoArgs& args);
Schedule BuildBroadcastBinomial(const AlgoArgs& args);
Schedule BuildBroadcastChain(const AlgoArgs& args);
Schedule BuildReduceBinomial(const AlgoArgs& args);
Schedule BuildReduceChain(const AlgoArgs& args);
Schedule BuildAllgatherBruck(const AlgoArgs& args);
Schedule BuildAllgatherRing(const AlgoArgs& args);
Schedule BuildReduceScatterRecursiveDoubling(const AlgoArgs& args);
Schedule BuildReduceScatterRing(const AlgoArgs& args);
Schedule BuildAlltoallPairwise(const AlgoArgs& args);
Schedule BuildBarrierDissemination(const AlgoArgs& args);
Schedule BuildPointToPoint(const AlgoArgs& args);
Schedule BuildLocal(const AlgoArgs& args);  // one rank: copies only

// AppendRecursiveDoubling()
//
// Appends an in-place recursive-doubling allreduce of `count` elements at
// `buf` (using `tmp`, same size, as receive space) to `b`. Non-power-of-two
// sizes fold the first 2*(size - 2^k) ranks in pairs before and unfold
// after. Shared by allreduce and the small reduce_scatter.
void AppendRecursiveDoubling(ScheduleBuilder& b, uint8_t* buf, uint8_t* tmp,
                             size_t count, int rank, int size);

// Segments of at most `chunk_bytes` (whole elements) for the pipelined
// algorithms: how many elements one segment holds, at least one.
size_t SegmentElems(const Options& options, size_t elem);
inline size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_ALGORITHMS_ALGORITHMS_H_
