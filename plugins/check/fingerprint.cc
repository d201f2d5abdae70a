// fingerprint.cc: see fingerprint.h.
#include "plugins/check/fingerprint.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include "syncline/plugin_sdk/op_format.h"

namespace syncline::plugin::check {
namespace {

struct ScanResult {
  uint32_t flags = 0;
  uint64_t first_bad = 0;
};

// Classifies one 16-bit float by its exponent field (`exp_mask` all ones
// means Inf when the mantissa is zero, NaN otherwise).
uint32_t Classify16(uint16_t bits, uint16_t exp_mask, uint16_t mantissa_mask) {
  if ((bits & exp_mask) != exp_mask) return 0;
  return (bits & mantissa_mask) ? kHasNan : kHasInf;
}

template <typename T>
uint32_t ClassifyFloat(T value) {
  if (std::isnan(value)) return kHasNan;
  if (std::isinf(value)) return kHasInf;
  return 0;
}

// Scans a CPU buffer of a floating-point dtype. Integers cannot hold NaN/Inf.
ScanResult ScanNonFinite(const sl_buffer_t& buffer) {
  ScanResult result;
  if (buffer.device != SL_DEVICE_CPU || buffer.data == nullptr) return result;
  for (size_t i = 0; i < buffer.count; ++i) {
    uint32_t f = 0;
    switch (buffer.dtype) {
      case SL_F32:
        f = ClassifyFloat(static_cast<const float*>(buffer.data)[i]);
        break;
      case SL_F64:
        f = ClassifyFloat(static_cast<const double*>(buffer.data)[i]);
        break;
      case SL_F16:
        f = Classify16(static_cast<const uint16_t*>(buffer.data)[i], 0x7c00, 0x03ff);
        break;
      case SL_BF16:
        f = Classify16(static_cast<const uint16_t*>(buffer.data)[i], 0x7f80, 0x007f);
        break;
      default:
        return result;
    }
    if (f != 0 && result.flags == 0) result.first_bad = i;
    result.flags |= f;
  }
  return result;
}

// The fields ranks must agree on.
auto Identity(const Fingerprint& f) {
  return std::make_tuple(f.kind, f.seq, f.count, f.dtype, f.root, f.redop);
}

std::string Describe(const Fingerprint& f) {
  // seq 0: the message names the op's number once, before the ranks.
  return backend::SlDescribeOp(static_cast<sl_op_kind_t>(f.kind), 0, f.dtype, f.count,
                               f.redop, f.root, -1, 0);
}

std::string RanksLabel(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + FormatRanks(ranks);
}

}  // namespace

Fingerprint MakeFingerprint(const sl_op_t& op, int rank, bool scan_non_finite) {
  Fingerprint f;
  std::memset(&f, 0, sizeof(f));  // padding-free, but keep the bytes defined
  f.magic = kFingerprintMagic;
  f.kind = static_cast<uint32_t>(op.kind);
  f.seq = op.seq;
  f.count = OpCount(op);
  f.dtype = op.kind == SL_OP_BARRIER ? -1 : static_cast<int32_t>(DataBuffer(op).dtype);
  f.root = HasRoot(op.kind) ? op.root : -1;
  f.redop = Reduces(op.kind) ? static_cast<int32_t>(op.redop) : -1;
  if (scan_non_finite && op.kind != SL_OP_BARRIER) {
    // A broadcast's only input is the root's buffer; the others' is
    // about to be overwritten, so NaN there is harmless.
    if (op.kind != SL_OP_BROADCAST || op.root == rank) {
      const ScanResult scan = ScanNonFinite(DataBuffer(op));
      f.flags = scan.flags;
      f.first_bad = scan.first_bad;
    }
  }
  return f;
}

sl_result_t CompareFingerprints(const std::vector<Fingerprint>& all, uint64_t my_seq,
                                std::string* message) {
  const std::string title = "op #" + std::to_string(my_seq) + ": ";
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].magic != kFingerprintMagic) {
      *message = title + "rank " + std::to_string(r) +
                 " sent a malformed op fingerprint; run the same Syncline build, with "
                 "the check interposer, on every rank";
      return SL_ERR_MISMATCH;
    }
  }
  // Group ranks by what they called, in order of first appearance.
  std::vector<std::vector<int>> groups;
  for (size_t r = 0; r < all.size(); ++r) {
    bool placed = false;
    for (auto& g : groups) {
      if (Identity(all[g.front()]) == Identity(all[r])) {
        g.push_back(static_cast<int>(r));
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back({static_cast<int>(r)});
  }
  if (groups.size() > 1) {
    bool seqs_differ = false;
    for (const auto& g : groups) seqs_differ |= all[g.front()].seq != all[0].seq;
    std::string out = title;
    for (size_t i = 0; i < groups.size(); ++i) {
      const Fingerprint& f = all[groups[i].front()];
      if (i > 0) out += "; ";
      out += RanksLabel(groups[i]) + " called " + Describe(f);
      if (seqs_differ) out += " as op #" + std::to_string(f.seq);
    }
    out +=
        ". Every rank must issue the same collectives in the same order with the "
        "same sizes (detected by the check interposer before the op ran)";
    *message = out;
    return SL_ERR_MISMATCH;
  }
  std::string bad;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].flags == 0) continue;
    if (!bad.empty()) bad += "; ";
    const char* what = (all[r].flags & kHasNan) && (all[r].flags & kHasInf)
                           ? "NaN and Inf"
                       : (all[r].flags & kHasNan) ? "NaN"
                                                  : "Inf";
    bad += "rank " + std::to_string(r) + "'s input holds " + what +
           " (first at element " + std::to_string(all[r].first_bad) + ")";
  }
  if (!bad.empty()) {
    *message = title + Describe(all[0]) + ": " + bad +
               " (SYNCLINE_CHECK_NAN=1 scan; unset it to let the op run)";
    return SL_ERR_INVALID_ARGUMENT;
  }
  return SL_OK;
}

std::string FormatRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    if (j - i >= 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
    } else {
      for (size_t k = i; k <= j; ++k) {
        out += (k > i ? "," : "") + std::to_string(ranks[k]);
      }
    }
    i = j + 1;
  }
  return out;
}

}  // namespace syncline::plugin::check
