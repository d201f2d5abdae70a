// tag.h: the 64-bit UCP tag every message of the UCX backend carries.
//
// UCP matches a receive to a message by (tag & mask). Every receive here uses
// the full mask, so the tag alone must make a message unambiguous:
//
//   bit 63..53  space    11 bits: the communicator's tag space on its worker
//   bit 52..33  source   the sender's rank, 20 bits (groups up to 1M ranks)
//   bit 32      p2p      1 for SEND/RECV, 0 for collectives
//   bit 31..0   payload  collectives: seq (20 bits) << 12 | step (12 bits)
//                        p2p: the caller's 32-bit tag
//
// `seq` is the backend's own count of collectives on this communicator, not
// sl_op_t::seq: the core numbers point-to-point ops too, and ranks may post
// different numbers of them, so only the collective count agrees across
// ranks. `step` tells the messages of one collective apart (a round or a
// segment index chosen by the algorithm so that sender and receiver agree).
// Both wrap (seq skipping 0, see TagSeq); that is safe because at most one collective runs at a time and
// UCP matches messages with equal tags from one sender in order.
//
// Tag spaces: a communicator made by comm_create gets its own UCP worker
// (transport.h) and tag space 0 on it. Every communicator split from it,
// recursively, shares that worker, so the space field is what keeps their
// messages apart: parent and child, and sibling children of different
// colors, never share a space on any worker, so no receive of one can match
// a message of another. Spaces are allocated at Split (split_plan.h): the
// new groups take the next spaces above the highest one any rank of the
// parent has used, so they are fresh on every member's worker, and are
// never reused while the worker lives (a late message for a destroyed
// group can only sit unmatched, never reach a new group). A family has
// kTagSpaces spaces; past that, Split falls back to a fresh worker.
//
// Thread safety: pure functions.
//
// Example:
//   uint64_t t = CollectiveTag(/*space=*/2, /*source=*/3, /*seq=*/42, /*step=*/7);
//   TagFields f = UnpackTag(t);   // f.source == 3, f.seq == 42, f.step == 7
#ifndef SYNCLINE_BACKENDS_UCX_TAG_H_
#define SYNCLINE_BACKENDS_UCX_TAG_H_

#include <cstdint>

namespace syncline::ucx_backend {

inline constexpr int kTagCommBits = 11;
inline constexpr int kTagSourceBits = 20;
inline constexpr int kTagSeqBits = 20;
inline constexpr int kTagStepBits = 12;
inline constexpr int kTagSourceShift = 33;
inline constexpr int kTagCommShift = kTagSourceShift + kTagSourceBits;  // 53
inline constexpr uint64_t kTagP2pBit = uint64_t{1} << 32;
inline constexpr int kMaxRanks = 1 << kTagSourceBits;
inline constexpr uint32_t kTagSpaces = 1u << kTagCommBits;
inline constexpr uint64_t kTagFullMask = ~uint64_t{0};
// Collective seq 0 is reserved for the communicator's own messages: the
// hello exchange (step 0) and failure notices (kTagNoticeStep), which are
// received from any source (kTagAnySourceMask).
inline constexpr uint32_t kTagNoticeStep = (1u << kTagStepBits) - 1;
inline constexpr uint64_t kTagAnySourceMask =
    ~(((uint64_t{1} << kTagSourceBits) - 1) << kTagSourceShift);

// The tag seq of the n-th collective (n >= 1): wraps within 1..2^20-1 so
// that it never reaches the reserved 0.
constexpr uint64_t TagSeq(uint64_t n) {
  return 1 + (n - 1) % ((uint64_t{1} << kTagSeqBits) - 1);
}

constexpr uint64_t Low(uint64_t value, int bits) {
  return value & ((uint64_t{1} << bits) - 1);
}

constexpr uint64_t CollectiveTag(uint64_t space, int source, uint64_t seq,
                                 uint32_t step) {
  return (Low(space, kTagCommBits) << kTagCommShift) |
         (Low(static_cast<uint64_t>(source), kTagSourceBits) << kTagSourceShift) |
         (Low(seq, kTagSeqBits) << kTagStepBits) | Low(step, kTagStepBits);
}

constexpr uint64_t P2pTag(uint64_t space, int source, uint32_t user_tag) {
  return (Low(space, kTagCommBits) << kTagCommShift) |
         (Low(static_cast<uint64_t>(source), kTagSourceBits) << kTagSourceShift) |
         kTagP2pBit | user_tag;
}

struct TagFields {
  uint64_t comm = 0;
  int source = 0;
  bool p2p = false;
  uint64_t seq = 0;      // collectives only
  uint32_t step = 0;     // collectives only
  uint32_t user_tag = 0; // p2p only
};

constexpr TagFields UnpackTag(uint64_t tag) {
  TagFields f;
  f.comm = tag >> kTagCommShift;
  f.source = static_cast<int>(Low(tag >> kTagSourceShift, kTagSourceBits));
  f.p2p = (tag & kTagP2pBit) != 0;
  if (f.p2p) {
    f.user_tag = static_cast<uint32_t>(tag);
  } else {
    f.seq = Low(tag >> kTagStepBits, kTagSeqBits);
    f.step = static_cast<uint32_t>(Low(tag, kTagStepBits));
  }
  return f;
}

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_TAG_H_
