// fingerprint.h: the fixed-size record that the check interposer exchanges
// before each collective, and the comparison that turns a set of records
// into an actionable message.
//
// The record has one size whatever the op, so the exchange (an allgather of
// sizeof(Fingerprint) bytes) cannot itself be broken by the very size
// mismatch it is meant to catch. Ranks run the same build on the same
// architecture (the core's backend agreement enforces the build), so the
// record is sent in host byte order.
//
// Thread safety: stateless functions; call from any thread.
//
// Example:
//   Fingerprint mine = MakeFingerprint(op, rank, /*scan_non_finite=*/false);
//   ... allgather into `all` ...
//   std::string why;
//   sl_result_t rc = CompareFingerprints(all, op.seq, &why);
#ifndef SYNCLINE_PLUGINS_CHECK_FINGERPRINT_H_
#define SYNCLINE_PLUGINS_CHECK_FINGERPRINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "syncline/plugin_abi.h"

namespace syncline::plugin::check {

// Fingerprint
//
// What every rank must agree on (kind, seq, dtype, count, root, redop), plus
// what this rank found when scanning its input for NaN/Inf. Fields that an
// op does not use hold a fixed value (-1), so that e.g. an allreduce's unused
// root can never cause a false mismatch.
struct Fingerprint {
  uint32_t magic;  // kFingerprintMagic: catches a peer of another build
  uint32_t kind;   // sl_op_kind_t
  uint64_t seq;
  uint64_t count;      // elements of the data buffer (OpCount)
  int32_t dtype;       // -1 for barrier
  int32_t root;        // -1 unless broadcast/reduce
  int32_t redop;       // -1 unless the op reduces
  uint32_t flags;      // kHasNan | kHasInf
  uint64_t first_bad;  // index of the first non-finite element, if any
};
static_assert(sizeof(Fingerprint) == 48, "the record's size is part of the exchange");

constexpr uint32_t kFingerprintMagic = 0x534c4650;  // "SLFP"
constexpr uint32_t kHasNan = 1u;
constexpr uint32_t kHasInf = 2u;

// The fingerprint of `op`. With `scan_non_finite`, floating-point CPU input
// (send buffer; for broadcast, only on the root) is scanned for NaN/Inf.
Fingerprint MakeFingerprint(const sl_op_t& op, int rank, bool scan_non_finite);

// Compares every rank's record (`all[r]` from rank r). Returns SL_OK when
// they agree and hold no NaN/Inf; SL_ERR_MISMATCH with a message such as
//   "op #17: ranks 0,1,3 called allreduce(f32, 1048576, sum); rank 2 called
//    broadcast(f32, 1024, root 0)"
// when they disagree; SL_ERR_INVALID_ARGUMENT naming the rank(s) whose input
// holds NaN or Inf. `my_seq` is this rank's sequence number, used to title
// the message.
sl_result_t CompareFingerprints(const std::vector<Fingerprint>& all, uint64_t my_seq,
                                std::string* message);

// "0,1,3" or "0-7" for a sorted list of ranks, for messages.
std::string FormatRanks(const std::vector<int>& ranks);

}  // namespace syncline::plugin::check

#endif  // SYNCLINE_PLUGINS_CHECK_FINGERPRINT_H_
