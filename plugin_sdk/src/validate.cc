// validate.cc: see validate.h.
#include "syncline/plugin_sdk/validate.h"

#include <cstdio>

#include "syncline/plugin_sdk/reduce.h"

namespace syncline::backend {
namespace {

bool Reduces(sl_op_kind_t kind) {
  return kind == SL_OP_ALLREDUCE || kind == SL_OP_REDUCE || kind == SL_OP_REDUCE_SCATTER;
}

std::string DeviceName(sl_device_type_t device) {
  switch (device) {
    case SL_DEVICE_CPU:
      return "host";
    case SL_DEVICE_CUDA:
      return "CUDA";
    default:
      return "device " + std::to_string(static_cast<int>(device));
  }
}

std::string Range(int size) { return "(0.." + std::to_string(size - 1) + ")"; }

// Checks one buffer the op reads or writes; `which` is "send" or "recv".
sl_result_t CheckBuffer(const sl_buffer_t& b, const char* which, const SlOpRules& rules,
                        std::string* why) {
  if (!SlIsValidDtype(b.dtype)) {
    *why = std::string("the ") + which + " buffer has an invalid dtype " +
           std::to_string(static_cast<int>(b.dtype));
    return SL_ERR_INVALID_ARGUMENT;
  }
  if (b.count == 0) return SL_OK;
  if (b.data == nullptr) {
    *why = std::string("the ") + which + " buffer has " + std::to_string(b.count) +
           " elements but a null pointer";
    return SL_ERR_INVALID_ARGUMENT;
  }
  if (b.device != rules.device) {
    *why = std::string("the ") + which + " buffer is in " + DeviceName(b.device) +
           " memory, but the " + rules.backend + " backend moves " +
           (rules.device == SL_DEVICE_CPU ? "CPU" : DeviceName(rules.device)) +
           " buffers only; " + rules.device_hint;
    return SL_ERR_UNSUPPORTED;
  }
  if (rules.device_index >= 0 && b.device_index != rules.device_index) {
    *why = std::string("the ") + which + " buffer is on cuda:" +
           std::to_string(b.device_index) + ", but this communicator was created for cuda:" +
           std::to_string(rules.device_index) + "; " + rules.backend +
           " moves data of one device per communicator";
    return SL_ERR_INVALID_ARGUMENT;
  }
  return SL_OK;
}

// The element counts of the buffer table in plugin_abi.h.
bool ShapeFits(const sl_op_t& op, int rank, int size) {
  const size_t n = op.send.count, m = op.recv.count, p = static_cast<size_t>(size);
  switch (op.kind) {
    case SL_OP_ALLREDUCE:
      return n == m;
    case SL_OP_REDUCE:
      return rank != op.root || n == m;
    case SL_OP_ALLGATHER:
      return m == n * p;
    case SL_OP_REDUCE_SCATTER:
      return n == m * p;
    case SL_OP_ALLTOALL:
      return n == m && n % p == 0;
    default:
      return true;
  }
}

}  // namespace

sl_result_t SlValidateOp(const sl_op_t& op, int rank, int size, const SlOpRules& rules,
                         std::string* message) {
  if (op.struct_size < SL_OP_MIN_SIZE) {
    *message = "op of " + std::to_string(op.struct_size) + " bytes, expected at least " +
               std::to_string(SL_OP_MIN_SIZE) +
               " (its struct_size is unset: start ops from sl_op_init)";
    return SL_ERR_INVALID_ARGUMENT;
  }
  if (static_cast<int>(op.kind) < 0 || op.kind >= SL_OP_KIND_COUNT) {
    *message = "unknown op kind " + std::to_string(static_cast<int>(op.kind));
    return SL_ERR_INVALID_ARGUMENT;
  }
  if (op.kind == SL_OP_BARRIER) return SL_OK;
  // The op's name is formatted only for an error: a snprintf per op was 7 %
  // of a 1-rank 8-byte allreduce's profile (bench/README.md, "The 8-byte path").
  auto head = [&op] { return SlOpName(op) + ": "; };
  if (!ShapeFits(op, rank, size)) {
    *message = head() + "send has " + std::to_string(op.send.count) + " and recv " +
               std::to_string(op.recv.count) + " elements, which does not fit the op on " +
               std::to_string(size) + " ranks (see the buffer table in plugin_abi.h)";
    return SL_ERR_INVALID_ARGUMENT;
  }
  if ((op.kind == SL_OP_BROADCAST || op.kind == SL_OP_REDUCE) &&
      (op.root < 0 || op.root >= size)) {
    *message = head() + "root " + std::to_string(op.root) +
               " is not a rank of this communicator " + Range(size);
    return SL_ERR_INVALID_ARGUMENT;
  }
  if ((op.kind == SL_OP_SEND || op.kind == SL_OP_RECV) &&
      (op.peer < 0 || op.peer >= size || op.peer == rank)) {
    *message = head() + "peer " + std::to_string(op.peer) +
               " must be another rank of this communicator " + Range(size) +
               ", not this rank " + std::to_string(rank);
    return SL_ERR_INVALID_ARGUMENT;
  }
  const bool uses_send = op.kind != SL_OP_BROADCAST && op.kind != SL_OP_RECV;
  const bool uses_recv = op.kind != SL_OP_SEND && (op.kind != SL_OP_REDUCE || rank == op.root);
  std::string why;
  sl_result_t rc = uses_send ? CheckBuffer(op.send, "send", rules, &why) : SL_OK;
  if (rc == SL_OK && uses_recv) rc = CheckBuffer(op.recv, "recv", rules, &why);
  if (rc != SL_OK) {
    *message = head() + why;
    return rc;
  }
  if (uses_send && uses_recv && op.send.dtype != op.recv.dtype) {
    *message = head() + "send is " + SlDtypeName(op.send.dtype) + " but recv is " +
               SlDtypeName(op.recv.dtype) + "; use one dtype";
    return SL_ERR_INVALID_ARGUMENT;
  }
  if (Reduces(op.kind) && !SlIsValidRedop(op.redop)) {
    *message = head() + "invalid reduce op " + std::to_string(static_cast<int>(op.redop));
    return SL_ERR_INVALID_ARGUMENT;
  }
  return SL_OK;
}

}  // namespace syncline::backend
