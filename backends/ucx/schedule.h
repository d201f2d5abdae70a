// schedule.h: a collective as data: rounds of transfers, each followed by
// local work.
//
// Every algorithm in algorithms/ builds a Schedule when the op is posted; an
// Operation (operation.h) then executes it without blocking. Round r posts
// all of its receives, then its sends, at once; when they have all completed, its
// actions (copies, reductions, the final AVG division) run, then round r+1
// starts. Keeping algorithms as plain data is what lets Wait/Test, the
// background progress thread and abort all drive or stop any op at any
// point, and lets the tests inspect a schedule without a network.
//
// Message matching: a Transfer's `step` goes into the UCP tag (see tag.h).
// Sender and receiver must give the same message the same step; algorithms
// use a round index or segment index that both sides compute alike.
// Zero-byte transfers are dropped by the builder on both sides alike
// (barrier sends one byte for that reason).
//
// Thread safety: a Schedule is built by the posting thread and then owned by
// the thread that drives progress.
#ifndef SYNCLINE_BACKENDS_UCX_SCHEDULE_H_
#define SYNCLINE_BACKENDS_UCX_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "syncline/plugin_abi.h"

namespace syncline::ucx_backend {

struct Transfer {
  bool send = false;
  int peer = 0;
  void* data = nullptr;
  size_t bytes = 0;
  uint32_t step = 0;
};

// Local work after a round. Counts are elements of the op's dtype, except
// for kCopy (bytes).
struct Action {
  enum Kind { kCopy, kReduce3, kDivide } kind = kCopy;
  void* dst = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  size_t count = 0;
};

struct Round {
  std::vector<Transfer> transfers;
  std::vector<Action> actions;
};

struct Schedule {
  const char* algorithm = "";
  sl_dtype_t dtype = SL_U8;
  sl_redop_t redop = SL_SUM;
  std::vector<Round> rounds;
  std::unique_ptr<uint8_t[]> scratch;  // uninitialized working memory
  size_t scratch_bytes = 0;            // what AllocScratch asked for
};

// ScheduleBuilder
//
// Appends rounds and their contents. Allocate scratch (once) before taking
// pointers into it.
//
// Example (one exchange with a reduction):
//   ScheduleBuilder b("pairwise", SL_F32, SL_SUM);
//   uint8_t* tmp = b.AllocScratch(bytes);
//   b.NewRound();
//   b.Send(peer, buf, bytes, 0);
//   b.Recv(peer, tmp, bytes, 0);
//   b.Reduce(buf, buf, tmp, n);
//   Schedule s = b.Finish();
class ScheduleBuilder {
 public:
  ScheduleBuilder(const char* algorithm, sl_dtype_t dtype, sl_redop_t redop);
  uint8_t* AllocScratch(size_t bytes);
  void NewRound();
  void Send(int peer, const void* data, size_t bytes, uint32_t step);
  void Recv(int peer, void* data, size_t bytes, uint32_t step);
  void Copy(void* dst, const void* src, size_t bytes);
  // dst = a (op) b, element-wise; dst may alias a or b.
  void Reduce(void* dst, const void* a, const void* b, size_t count);
  void Divide(void* data, size_t count);
  size_t elem() const { return elem_; }
  Schedule Finish();

 private:
  Round& Current();
  Schedule schedule_;
  size_t elem_;
};

// Splits `count` elements into `parts` nearly equal blocks: block i starts
// at BlockOffset(count, parts, i) and holds BlockCount(count, parts, i).
size_t BlockCount(size_t count, int parts, int i);
size_t BlockOffset(size_t count, int parts, int i);

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_SCHEDULE_H_
