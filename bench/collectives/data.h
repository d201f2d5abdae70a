// data.h: inputs and the correctness oracle of the collective benchmark.
//
// Every rank fills its input from a formula of (rank, index) that every
// other rank can evaluate, so each rank can compute the exact expected
// output locally and count wrong elements without any extra communication.
// Inputs are small integers (0..7, or -4..3 for signed types): sums over up
// to 16 ranks are exact in every dtype, bf16 and i8 included, so #wrong is a
// real count and not a rounding artefact. Averages are compared with a
// tolerance of the dtype's precision.
//
// Example:
//   OpLayout layout = LayoutFor(Op::kAllgather, DataType::kFloat32, 1 << 20, 2);
//   FillInput(Op::kAllgather, DataType::kFloat32, rank, 2, layout, send);
//   ... run the allgather ...
//   int64_t wrong = CountWrong(Op::kAllgather, DataType::kFloat32,
//                              ReduceOp::kSum, rank, 2, layout, recv);
#ifndef SYNCLINE_BENCH_COLLECTIVES_DATA_H_
#define SYNCLINE_BENCH_COLLECTIVES_DATA_H_

#include <cstddef>
#include <cstdint>

#include "bench/common/bench_common.h"
#include "syncline/types.h"

namespace syncline::bench {

// Element counts of one op at a nominal size, in the public API's terms.
// `count` and `bytes` are nccl-tests' columns: the op's largest buffer
// (allgather's output, reduce_scatter's input, the whole alltoall buffer).
struct OpLayout {
  size_t send_count = 0;  // elements of the send buffer (0: in place)
  size_t recv_count = 0;  // elements of the receive buffer
  size_t count = 0;
  size_t bytes = 0;
};

// LayoutFor()
//
// The layout for a nominal `bytes`: counts are rounded down so that blocks
// are whole (per-rank block at least one element), so `bytes` in the result
// may be a little smaller than asked.
OpLayout LayoutFor(Op op, DataType dtype, size_t bytes, int ranks);

// FillInput()
//
// Writes this rank's input: the send buffer, or for broadcast the buffer
// itself on the root (`data`). Other ranks' broadcast buffers are left alone.
void FillInput(Op op, DataType dtype, int rank, int ranks, const OpLayout& layout,
               void* data);

// Scribble()
//
// Overwrites an output buffer with a value no correct result contains (all
// bytes 0x7f), so that a stale buffer cannot pass the check.
void Scribble(void* data, size_t bytes);

// CountWrong()
//
// Number of elements of this rank's output (`recv`, or the broadcast buffer)
// that differ from the oracle.
int64_t CountWrong(Op op, DataType dtype, ReduceOp redop, int rank, int ranks,
                   const OpLayout& layout, const void* recv);

}  // namespace syncline::bench

#endif  // SYNCLINE_BENCH_COLLECTIVES_DATA_H_
