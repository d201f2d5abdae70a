// op_label.h: what an op is, kept as fields and put into words only when
// someone reads it.
//
// Every posted op is described in its errors, Work::Describe(), the flight
// recorder's dump and the published progress, e.g.
//   "allreduce #17 (f32 x 1024, sum) on rank 1/4 over gloo".
// Formatting that text on every post cost a string format, five appends and
// two heap copies per op, on the path of an 8-byte allreduce (bench/README.md,
// "The 8-byte path"); an OpLabel is a few words copied by value, and the text
// is built from them on demand by the plugin SDK's one description of an op
// (SlDescribeOp), so the core's messages read as the backends' do.
//
// Thread safety: a value; `where` points into the communicator's
// FlightRecorder, which every holder of a label keeps alive.
#ifndef SYNCLINE_CORE_SRC_OP_LABEL_H_
#define SYNCLINE_CORE_SRC_OP_LABEL_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace syncline::internal {

struct OpLabel {
  uint64_t seq = 0;  // as posted: point-to-point ops carry kP2pSeqBit
  int kind = 0;      // sl_op_kind_t
  int dtype = 0;     // DataType of the op's data buffer
  size_t count = 0;  // elements of the op's data buffer
  int redop = 0;     // ReduceOp (reductions)
  int root = 0;      // broadcast, reduce
  int peer = -1;     // send, recv
  uint32_t tag = 0;  // send, recv
  // " on rank 1/4 over gloo": the same for every op of a communicator, so
  // it is formatted once (FlightRecorder::where()). Null: left out.
  const std::string* where = nullptr;

  // "allreduce #17 (f32 x 1024, sum) on rank 1/4 over gloo".
  std::string ToString() const;
  // The same without the " on rank ..." part: "allreduce #17 (f32 x 1024, sum)".
  std::string WithoutWhere() const;
};

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_OP_LABEL_H_
