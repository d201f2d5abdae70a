// rank.h: the body of one rank of the collective benchmark.
//
// A rank joins the job's rendezvous (set by the benchmark's own launcher, by
// syncline-run, torchrun-style variables or mpirun), creates one
// Communicator per requested backend over a prefixed view of the same store,
// and runs one Google Benchmark case per (backend, op, dtype, size). Every
// rank registers the same cases with the same fixed iteration and repetition
// counts, so they issue the same collectives in the same order. Rank 0
// prints the nccl-tests table and writes the rows.
//
// Per case and repetition: fill the input, scribble the output, run one op
// and check it (the first warm-up), run the other warm-ups, then the timed
// iterations (the output is scribbled again before the last one, which is
// checked after the loop). The slowest rank's mean op time and the wrong
// counts of every rank are combined with two small allreduces outside the
// timed region. With --variant, every variant's repetitions of one
// (op, dtype, size) alternate (see BenchConfig::variants).
#ifndef SYNCLINE_BENCH_COLLECTIVES_RANK_H_
#define SYNCLINE_BENCH_COLLECTIVES_RANK_H_

#include <string>
#include <vector>

#include "bench/common/bench_common.h"
#include "syncline/types.h"

namespace syncline::bench {

struct BenchConfig {
  std::vector<std::string> backends = {"gloo"};
  std::vector<Op> ops = {Op::kAllreduce, Op::kAllgather, Op::kReduceScatter,
                         Op::kBroadcast, Op::kAlltoall};
  std::vector<DataType> dtypes = {DataType::kFloat32};
  ReduceOp redop = ReduceOp::kSum;
  SizeSchedule sizes;
  std::vector<int> world_sizes = {2};
  int warmup = 2;       // untimed ops per repetition, the first one checked
  double warmup_ms = kDefaultWarmupMs;  // then untimed ops for this long (WarmFor)
  int repetitions = 5;  // the median over these is reported
  double timeout_s = 120;
  std::string json;     // rows as JSON ("" for none)
  // Passed to every backend as CommunicatorOptions::backend_options, e.g.
  // "allreduce_small_max=0" to force the UCX backend's ring.
  std::string backend_options;
  std::string system_suffix;  // appended to the system name, e.g. "/ring"
  // Allreduce into its own input (the output buffer), as torch's all_reduce
  // and DDP's buckets run; the other ops are unchanged.
  bool in_place = false;
  // --variant=LABEL:OPTIONS, repeatable: one communicator per backend and
  // variant, its options appended to backend_options and "/LABEL" to its
  // system name. With variants the repetitions are interleaved: per (op,
  // dtype, size), repetition 1 of every variant, then repetition 2 of
  // every variant, ..., so that load changes on the machine hit every
  // variant alike; the row is the median over that variant's repetitions.
  struct Variant {
    std::string label;
    std::string options;
  };
  std::vector<Variant> variants;
};

// RunRank()
//
// Runs this process as one rank. `argc`/`argv` hold only Google Benchmark's
// own flags (--benchmark_*). `rows_path` (may be empty) receives rank 0's
// rows as JSON. Returns the process exit code: 0, or 1 when a backend
// failed to run an op or a check found wrong elements.
int RunRank(const BenchConfig& config, int* argc, char** argv,
            const std::string& rows_path);

// MachineBanner()
//
// "# <program>: <cores> cores, <memory> GiB, <date UTC>, syncline <version>"
// lines, each starting with '#'.
std::string MachineBanner(const std::string& program);

}  // namespace syncline::bench

#endif  // SYNCLINE_BENCH_COLLECTIVES_RANK_H_
