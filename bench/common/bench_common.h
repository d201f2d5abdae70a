// bench_common.h: what every Syncline benchmark program reports, and how.
//
// The benchmarks (bench/collectives, bench/raw_gloo, bench/membw; the C MPI
// program mirrors these rules in its own file) share one size schedule, one
// iteration rule and one row format, so that the comparison script can put
// their figures side by side without converting anything:
//  - sizes run down from max_bytes, dividing by `factor`, to min_bytes (both
//    included; 8 B ... 64 MiB by 4 by default);
//  - IterationsFor(bytes) fixes the timed iterations of one repetition from
//    the size alone, so that every rank (and every system) runs the same
//    number of ops without having to agree at run time;
//  - a Row is one (system, op, dtype, size) result in nccl-tests' terms:
//    size is the largest buffer of the op in bytes, count its elements,
//    algbw = size / time and busbw = algbw * BusFactor(op, ranks).
//
// Example:
//   for (size_t bytes : Sizes({})) { int iters = IterationsFor(bytes); ... }
//   std::printf("%s\n", TableLine(row).c_str());
#ifndef SYNCLINE_BENCH_COMMON_BENCH_COMMON_H_
#define SYNCLINE_BENCH_COMMON_BENCH_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace syncline::bench {

// The collectives the benchmarks measure.
enum class Op { kAllreduce, kAllgather, kReduceScatter, kBroadcast, kAlltoall, kReduce };

// OpName() / ParseOp()
//
// "allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall",
// "reduce" (to root 0).
const char* OpName(Op op);
std::optional<Op> ParseOp(const std::string& name);

// BusFactor()
//
// nccl-tests' bus-bandwidth factors: 2(n-1)/n for allreduce; (n-1)/n for
// allgather, reduce_scatter and alltoall; 1 for broadcast and reduce.
double BusFactor(Op op, int ranks);

// Sizes()
//
// max_bytes, max_bytes/factor, ... while above min_bytes, then min_bytes,
// in increasing order: 8 B to 64 MiB by 4 gives 8, 16, 64, 256, ..., 1 MiB,
// 4 MiB, 16 MiB, 64 MiB (13 sizes).
struct SizeSchedule {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{64} << 20;
  int factor = 4;
};
std::vector<size_t> Sizes(const SizeSchedule& schedule);

// IterationsFor()
//
// Timed iterations per repetition for a message of `bytes`: about 16 MiB of
// traffic per repetition, at least 3 and at most 100 iterations.
int IterationsFor(size_t bytes);

// WarmFor()
//
// Runs untimed ops until every rank has spent at least `ms` milliseconds in
// them, so that a timed stretch starts from the machine's steady state: on
// this VM the ops right after a compute phase (the element-by-element check
// of the first warm-up, an input fill) run up to twice their steady time for
// some milliseconds, and a count of warm-ups covers that span at some sizes
// only. `run_op()` runs one op; `all_done(mine)` is a collective that returns
// true when every rank passed true. The ops run in chunks of 1, 2, 4, ...
// with one all_done() after each chunk, so every rank runs the same ops.
// Returns the ops run; `ms` <= 0 runs none and calls no collective (every
// rank must pass the same `ms`).
int64_t WarmFor(double ms, const std::function<void()>& run_op,
                const std::function<bool(bool)>& all_done);

// Default of the shared --warmup_ms flag.
inline constexpr double kDefaultWarmupMs = 20;

// ParseBytes()
//
// "8", "4K", "64M", "1G" (binary multiples); nullopt when malformed.
std::optional<size_t> ParseBytes(const std::string& text);

// Splits "a,b,c" into its non-empty parts.
std::vector<std::string> SplitList(const std::string& text);

// One measured point, in nccl-tests' columns plus the system and rank count.
struct Row {
  std::string system;  // e.g. "syncline-gloo", "raw-gloo", "membw-bound"
  std::string op;      // OpName()
  std::string dtype;   // "f32", ...
  std::string redop;   // "sum", or "none" for ops that do not reduce
  int ranks = 0;
  size_t bytes = 0;    // nccl-tests' "size"
  size_t count = 0;    // elements in that buffer
  double time_us = 0;  // median over repetitions, slowest rank
  double algbw = 0;    // GB/s (1e9 bytes/s)
  double busbw = 0;    // GB/s
  int64_t wrong = 0;   // wrong elements, summed over ranks and checks
  // Each repetition's time (us), in the order run; written to JSON as
  // "samples_us" when not empty (the interleaved sweeps keep them so that
  // their spread can be judged).
  std::vector<double> samples_us;
};

// Fills algbw and busbw from bytes, time_us, op and ranks.
void ComputeBandwidth(Row* row);

// TableHeader() / TableLine()
//
// nccl-tests' layout: size (B), count, type, redop, time (us), algbw, busbw
// (GB/s), #wrong. The header is two comment lines starting with '#'.
std::string TableHeader();
std::string TableLine(const Row& row);

// RowJson()
//
// One row as a JSON object on one line (the schema bench/compare reads).
std::string RowJson(const Row& row);

// WriteRowsJson()
//
// Writes {"program": ..., "rows": [...]} to `path`; false on an I/O error.
bool WriteRowsJson(const std::string& path, const std::string& program,
                   const std::vector<Row>& rows);

// Median of `values` (the mean of the middle two for an even count).
double Median(std::vector<double> values);

// out[i] = max(a[i], b[i]) over `n` doubles: the reduce function of the
// programs that call Gloo directly, to find the slowest rank's times.
void MaxOfDoubles(void* out, const void* a, const void* b, size_t n);

}  // namespace syncline::bench

#endif  // SYNCLINE_BENCH_COMMON_BENCH_COMMON_H_
