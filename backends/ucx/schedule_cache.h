// schedule_cache.h: the schedules of a communicator's recent small ops,
// kept for the next op that is the same.
//
// An op's Schedule depends only on the op (kind, buffers, counts, dtypes,
// reduction, root, peer and tag) and on its communicator (rank, size,
// options, whether the ranks share cores), so a loop that repeats an op on
// the same buffers -- a training step's small allreduces, a benchmark --
// built the same schedule every time: a third of the instructions of an
// 8-byte allreduce at 2 ranks, with 4-5 allocations (bench/README.md, "The
// 8-byte path"). A hit costs a comparison of the op's fields.
//
// Ops may share a schedule because a schedule is read-only while it runs,
// except for its scratch memory, and the ops that can run at once never
// share scratch: a communicator runs its collectives one at a time, in
// order, and after a collective fails it runs no other, so a failed op's
// transfers that UCP still holds never meet a later op's; point-to-point
// ops, which do run side by side, share only schedules without scratch.
// Schedules with more than kMaxScratchBytes of scratch are not kept (large
// ops, whose build cost is noise next to the transfer, and whose scratch
// would stay allocated).
//
// Thread safety: the posting thread only (Communicator::Post is serialized);
// a schedule it returns may be read by any thread.
#ifndef SYNCLINE_BACKENDS_UCX_SCHEDULE_CACHE_H_
#define SYNCLINE_BACKENDS_UCX_SCHEDULE_CACHE_H_

#include <array>
#include <cstddef>
#include <memory>

#include "backends/ucx/algorithms/algorithms.h"
#include "backends/ucx/schedule.h"
#include "syncline/plugin_abi.h"

namespace syncline::ucx_backend {

class ScheduleCache {
 public:
  static constexpr size_t kMaxScratchBytes = 64 * 1024;
  static constexpr size_t kEntries = 4;

  // The schedule of `args.op` (SelectSchedule), from the cache when an
  // earlier op with the same fields built it on this communicator. `args`
  // must be the communicator's, as for every op before.
  std::shared_ptr<const Schedule> Get(const AlgoArgs& args);

  // Whether `a` and `b` get the same schedule on one communicator: every
  // field but the sequence number, the timeout and the struct size.
  static bool SameSchedule(const sl_op_t& a, const sl_op_t& b);

 private:
  struct Entry {
    sl_op_t op{};
    std::shared_ptr<const Schedule> schedule;  // null: empty
  };
  std::array<Entry, kEntries> entries_;
  size_t next_ = 0;  // replaced next (round robin)
};

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_SCHEDULE_CACHE_H_
