#include "bench/collectives/rank.h"

#include <benchmark/benchmark.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>

#include "bench/collectives/data.h"
#include "bench/collectives/reporter.h"
#include "syncline/communicator.h"
#include "syncline/rendezvous.h"
#include "syncline/store.h"

#ifndef SYNCLINE_BENCH_VERSION
#define SYNCLINE_BENCH_VERSION "unknown"
#endif

namespace syncline::bench {
namespace {

// A page-aligned buffer, touched once so that page faults stay out of the
// timed loop.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

Buffer AllocateTouched(size_t bytes) {
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  Buffer buffer(std::aligned_alloc(4096, rounded));
  if (buffer == nullptr) {
    std::fprintf(stderr, "syncline-bench-collectives: cannot allocate %zu bytes\n", bytes);
    std::_Exit(2);
  }
  std::memset(buffer.get(), 0, rounded);
  return buffer;
}

// A failed op leaves the ranks out of step; stop this rank, and the others
// then fail on their next op instead of waiting for it.
[[noreturn]] void Die(int rank, const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "syncline-bench-collectives [rank %d]: %s: %s\n", rank, what.c_str(),
               status.ToString().c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void Run(Communicator* comm, absl::StatusOr<std::unique_ptr<Work>> work,
         const char* what) {
  if (!work.ok()) Die(comm->rank(), what, work.status());
  const absl::Status status = (*work)->Wait();
  if (!status.ok()) Die(comm->rank(), what, status);
}

void PostAndWait(Communicator* comm, const CaseInfo& info, void* send, void* recv) {
  const OpLayout& l = info.layout;
  const BufferView in = View(info.in_place ? recv : send, l.send_count, info.dtype);
  const BufferView out = View(recv, l.recv_count, info.dtype);
  switch (info.op) {
    case Op::kAllreduce: {
      AllreduceOptions options;
      options.op = info.redop;
      return Run(comm, comm->Allreduce(in, out, options), "allreduce");
    }
    case Op::kAllgather:
      return Run(comm, comm->Allgather(in, out), "allgather");
    case Op::kReduceScatter: {
      ReduceScatterOptions options;
      options.op = info.redop;
      return Run(comm, comm->ReduceScatter(in, out, options), "reduce_scatter");
    }
    case Op::kBroadcast:
      return Run(comm, comm->Broadcast(out), "broadcast");
    case Op::kAlltoall:
      return Run(comm, comm->Alltoall(in, out), "alltoall");
    case Op::kReduce: {
      ReduceOptions options;
      options.op = info.redop;
      options.root = 0;
      return Run(comm, comm->Reduce(in, out, options), "reduce");
    }
  }
}

// One f64 allreduce outside the timed region.
double AllreduceScalar(Communicator* comm, double value, ReduceOp op) {
  double x = value;
  AllreduceOptions options;
  options.op = op;
  Run(comm, comm->Allreduce(View(&x, 1), options), "allreduce of the results");
  return x;
}

void RunCase(benchmark::State& state, Communicator* comm, const CaseInfo& info,
             void* send, void* recv, int warmup, double warmup_ms) {
  const int rank = comm->rank();
  const bool output_is_input = (info.op == Op::kBroadcast && rank == 0) || info.in_place;
  const size_t out_bytes = info.layout.recv_count * DataTypeSize(info.dtype);
  auto fill = [&] {
    FillInput(info.op, info.dtype, rank, info.ranks, info.layout,
              info.op == Op::kBroadcast || info.in_place ? recv : send);
  };
  fill();
  if (!output_is_input) Scribble(recv, out_bytes);
  // In place, the send buffer must not be read: junk there shows as wrong
  // elements if it is.
  if (info.in_place) Scribble(send, out_bytes);
  PostAndWait(comm, info, send, recv);
  int64_t wrong = CountWrong(info.op, info.dtype, info.redop, rank, info.ranks,
                             info.layout, recv);
  // In place, each op reduces the last one's result: the warm-up and timed
  // ops run on zeros (sums cannot grow), the checked op after them on the
  // input again.
  if (info.in_place) std::memset(recv, 0, out_bytes);
  for (int i = 1; i < warmup; ++i) PostAndWait(comm, info, send, recv);
  WarmFor(
      warmup_ms, [&] { PostAndWait(comm, info, send, recv); },
      [&](bool done) { return AllreduceScalar(comm, done ? 1 : 0, ReduceOp::kMin) == 1; });

  // The ops are timed in one batch from a barrier, as every other benchmark
  // here times its ops (raw_ucx, raw_gloo, mpi_bench, torch_gloo.py): a clock
  // pair and the framework's bookkeeping per op would add their cost to each
  // small op and, on the peer, delay the next one; and work between timed
  // ops (a refill, a scribble) is a compute phase, after which this VM runs
  // the next ops slower for a while (WarmFor). The barrier keeps a rank that
  // left the warm-up first from counting the others' lag.
  using Clock = std::chrono::steady_clock;
  const int64_t iterations = state.max_iterations;
  double total_s = 0;
  while (state.KeepRunningBatch(iterations)) {
    Run(comm, comm->Barrier(), "barrier before the timed ops");
    const auto start = Clock::now();
    for (int64_t i = 0; i < iterations; ++i) PostAndWait(comm, info, send, recv);
    total_s = std::chrono::duration<double>(Clock::now() - start).count();
    state.SetIterationTime(total_s);
  }
  // Then, untimed, one more op from a scribbled output (in place: from the
  // input again), checked: the timed ops are the same calls on the same
  // buffers.
  if (info.in_place) fill();
  if (!output_is_input) Scribble(recv, out_bytes);
  PostAndWait(comm, info, send, recv);
  wrong += CountWrong(info.op, info.dtype, info.redop, rank, info.ranks, info.layout, recv);

  const double mean_us = total_s * 1e6 / static_cast<double>(std::max<int64_t>(iterations, 1));
  const double time_us = AllreduceScalar(comm, mean_us, ReduceOp::kMax);
  const double wrong_all = AllreduceScalar(comm, static_cast<double>(wrong), ReduceOp::kSum);
  Row row;
  row.op = OpName(info.op);
  row.ranks = info.ranks;
  row.bytes = info.layout.bytes;
  row.time_us = time_us;
  ComputeBandwidth(&row);
  state.counters["time_us"] = time_us;
  state.counters["algbw_GBps"] = row.algbw;
  state.counters["busbw_GBps"] = row.busbw;
  state.counters["wrong"] = wrong_all;
  state.counters["bytes"] = static_cast<double>(info.layout.bytes);
}

}  // namespace

std::string MachineBanner(const std::string& program) {
  struct sysinfo si {};
  sysinfo(&si);
  const double gib = static_cast<double>(si.totalram) * si.mem_unit / (1024.0 * 1024 * 1024);
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  char line[512];
  std::snprintf(line, sizeof(line),
                "# %s: %ld cores, %.1f GiB memory, %s, syncline %s, google benchmark\n",
                program.c_str(), sysconf(_SC_NPROCESSORS_ONLN), gib, date,
                SYNCLINE_BENCH_VERSION);
  return line;
}

int RunRank(const BenchConfig& config, int* argc, char** argv,
            const std::string& rows_path) {
  const absl::Duration timeout = absl::Seconds(config.timeout_s);
  auto info = ResolveRendezvous(-1, -1);
  if (!info.ok()) Die(-1, "rendezvous", info.status());
  auto store = ConnectRendezvousStore(*info, timeout);
  if (!store.ok()) Die(info->rank, "store", store.status());

  // One communicator per backend, or per backend and variant.
  struct System {
    std::unique_ptr<Communicator> comm;
    std::string name;  // "syncline-ucx", "syncline-ucx/ring"
  };
  std::vector<BenchConfig::Variant> variants = config.variants;
  if (variants.empty()) variants.push_back({"", ""});
  std::vector<System> comms;
  for (const std::string& backend : config.backends) {
    for (const BenchConfig::Variant& variant : variants) {
      CommunicatorOptions options;
      options.rank = info->rank;
      options.world_size = info->world_size;
      options.backend = backend;
      options.timeout = timeout;
      const std::string label = variant.label.empty() ? "" : "/" + variant.label;
      options.store = MakePrefixStore("bench-" + backend + label, *store);
      options.backend_options = config.backend_options;
      if (!variant.options.empty()) {
        if (!options.backend_options.empty()) options.backend_options += ";";
        options.backend_options += variant.options;
      }
      auto comm = Communicator::Create(options);
      if (!comm.ok()) {
        if (info->rank == 0) {
          std::printf("# %s%s: not available: %s\n", backend.c_str(), label.c_str(),
                      comm.status().ToString().c_str());
        }
        continue;
      }
      const std::string name =
          "syncline-" + (*comm)->backend_name() + config.system_suffix + label;
      comms.push_back({std::move(*comm), name});
    }
  }

  if (comms.empty()) {
    std::fprintf(stderr, "syncline-bench-collectives [rank %d]: no backend could be created\n",
                 info->rank);
    return 1;
  }

  size_t max_bytes = 0;
  for (size_t bytes : Sizes(config.sizes)) max_bytes = std::max(max_bytes, bytes);
  Buffer send = AllocateTouched(max_bytes + 64);
  Buffer recv = AllocateTouched(max_bytes + 64);

  // Without variants: per system, op, dtype and size, one case of
  // `repetitions` repetitions. With variants (interleaved): per op, dtype
  // and size, `repetitions` rounds of one repetition of every system.
  const bool interleave = !config.variants.empty();
  const int repetitions = std::max(config.repetitions, 1);
  std::map<std::string, CaseInfo> cases;
  auto add_case = [&](const System& system, Op op, DataType dtype, size_t bytes) {
    CaseInfo c;
    c.system = system.name;
    c.op = op;
    c.dtype = dtype;
    c.redop = config.redop;
    c.ranks = system.comm->size();
    c.layout = LayoutFor(op, dtype, bytes, system.comm->size());
    c.in_place = config.in_place && op == Op::kAllreduce;
    const std::string name = c.system + "/n" + std::to_string(c.ranks) + "/" +
                             OpName(op) + "/" + DataTypeName(dtype) + "/" +
                             std::to_string(c.layout.bytes);
    Communicator* raw = system.comm.get();
    void* s = send.get();
    void* r = recv.get();
    const int warmup = std::max(config.warmup, 1);
    const double warmup_ms = config.warmup_ms;
    auto* b = benchmark::RegisterBenchmark(
        name.c_str(), [raw, c, s, r, warmup, warmup_ms](benchmark::State& state) {
          RunCase(state, raw, c, s, r, warmup, warmup_ms);
        });
    b->Iterations(IterationsFor(c.layout.bytes))
        ->Repetitions(interleave ? 1 : repetitions)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    if (!interleave && repetitions > 1) b->ReportAggregatesOnly(true);
    cases[name] = c;
  };
  if (interleave) {
    for (Op op : config.ops) {
      for (DataType dtype : config.dtypes) {
        for (size_t bytes : Sizes(config.sizes)) {
          for (int rep = 0; rep < repetitions; ++rep) {
            for (const System& system : comms) add_case(system, op, dtype, bytes);
          }
        }
      }
    }
  } else {
    for (const System& system : comms) {
      for (Op op : config.ops) {
        for (DataType dtype : config.dtypes) {
          for (size_t bytes : Sizes(config.sizes)) add_case(system, op, dtype, bytes);
        }
      }
    }
  }

  benchmark::Initialize(argc, argv);
  NcclTableReporter table(cases, MachineBanner("syncline-bench-collectives"),
                          interleave ? repetitions : 0);
  SilentReporter silent;
  if (info->rank == 0) {
    benchmark::RunSpecifiedBenchmarks(&table);
  } else {
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();

  int64_t wrong = 0;
  for (const Row& row : table.rows()) wrong += row.wrong;
  if (info->rank == 0 && !rows_path.empty() &&
      !WriteRowsJson(rows_path, "syncline-bench-collectives", table.rows())) {
    std::fprintf(stderr, "syncline-bench-collectives: cannot write %s\n", rows_path.c_str());
    return 1;
  }
  if (wrong > 0) {
    std::fprintf(stderr, "syncline-bench-collectives: %lld wrong elements\n",
                 static_cast<long long>(wrong));
    return 1;
  }
  return 0;
}

}  // namespace syncline::bench
