#include "backends/ucx/schedule_cache.h"

#include <utility>

namespace syncline::ucx_backend {
namespace {

bool SameBuffer(const sl_buffer_t& a, const sl_buffer_t& b) {
  return a.data == b.data && a.count == b.count && a.dtype == b.dtype &&
         a.device == b.device && a.device_index == b.device_index;
}

}  // namespace

bool ScheduleCache::SameSchedule(const sl_op_t& a, const sl_op_t& b) {
  return a.kind == b.kind && SameBuffer(a.send, b.send) && SameBuffer(a.recv, b.recv) &&
         a.redop == b.redop && a.root == b.root && a.peer == b.peer && a.tag == b.tag;
}

std::shared_ptr<const Schedule> ScheduleCache::Get(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  for (const Entry& e : entries_) {
    if (e.schedule != nullptr && SameSchedule(e.op, op)) return e.schedule;
  }
  auto schedule = std::make_shared<const Schedule>(SelectSchedule(args));
  const bool p2p = op.kind == SL_OP_SEND || op.kind == SL_OP_RECV;
  const bool shareable = p2p ? schedule->scratch_bytes == 0
                             : schedule->scratch_bytes <= kMaxScratchBytes;
  if (shareable) {
    entries_[next_] = Entry{op, schedule};
    next_ = (next_ + 1) % kEntries;
  }
  return schedule;
}

}  // namespace syncline::ucx_backend
