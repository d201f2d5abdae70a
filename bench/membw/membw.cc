// syncline-bench-membw: the memory-bandwidth bound of a collective on this
// machine.
//
// On one host a collective moves data through memory, so memory bandwidth
// bounds it whatever the library. This probe times the two kernels a
// shared-memory collective is made of, on `--threads` threads at once (one
// per rank, sharing the memory bus as the ranks would):
//   sum(N)   acc[i] += a[i] over N bytes of f32 (reads 2N, writes N): the
//            leanest reduction a collective can do, accumulating an
//            incoming block into its own buffer in place
//   copy(N)  memcpy of N bytes (reads N, writes N)
// and derives, for n = --threads ranks and a message of N bytes:
//   allreduce  t = sum((n-1)/n N) + copy((n-1)/n N)  (reduce-scatter then
//              allgather through memory), busbw = 2(n-1)/n N / t
//   allgather  t = copy((n-1)/n N),                  busbw = (n-1)/n N / t
//   broadcast  t = copy(N),                           busbw = N / t
// Rows are "membw-bound" (those three ops) plus "membw-sum"/"membw-copy"
// (the kernels at N, busbw = N / t). Times are the slowest thread's, median
// over repetitions; sizes and iterations follow bench/common.
//
// Usage: syncline-bench-membw [--threads=2] [--min_bytes=8] [--max_bytes=64M]
//            [--factor=4] [--repetitions=5] [--json=FILE]
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/help.h"

namespace syncline::bench {
namespace {

struct Flags {
  int threads = 2;
  SizeSchedule sizes;
  int repetitions = 5;
  std::string json;
};

// Each thread's own buffers, touched before timing. The accumulated values
// stay small integers (at most a few thousand additions of 1).
struct Buffers {
  std::vector<float> a, out;
  explicit Buffers(size_t count) : a(count, 1.0f), out(count, 0.0f) {}
};

enum class Kernel { kSum, kCopy };

void RunKernel(Kernel kernel, Buffers* buffers, size_t bytes) {
  const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  float* __restrict out = buffers->out.data();
  if (kernel == Kernel::kCopy) {
    std::memcpy(out, buffers->a.data(), count * sizeof(float));
    return;
  }
  const float* __restrict a = buffers->a.data();
  for (size_t i = 0; i < count; ++i) out[i] += a[i];
}

// Median over repetitions of the slowest thread's time per kernel call, us.
double TimeKernel(Kernel kernel, std::vector<Buffers>* buffers, size_t bytes,
                  int repetitions) {
  const int threads = static_cast<int>(buffers->size());
  const int iters = IterationsFor(bytes);
  std::vector<double> reps;
  for (int rep = 0; rep < repetitions; ++rep) {
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, nullptr, threads);
    std::vector<double> seconds(threads, 0);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        RunKernel(kernel, &(*buffers)[t], bytes);  // warm-up
        pthread_barrier_wait(&barrier);
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) RunKernel(kernel, &(*buffers)[t], bytes);
        seconds[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    }
    for (std::thread& thread : pool) thread.join();
    pthread_barrier_destroy(&barrier);
    reps.push_back(*std::max_element(seconds.begin(), seconds.end()) * 1e6 / iters);
  }
  return Median(reps);
}

Row MakeRow(const std::string& system, const std::string& op, int ranks, size_t bytes,
            double time_us, double busbw) {
  Row row;
  row.system = system;
  row.op = op;
  row.dtype = "f32";
  row.redop = op == "allreduce" || op == "sum" ? "sum" : "none";
  row.ranks = ranks;
  row.bytes = bytes;
  row.count = bytes / sizeof(float);
  row.time_us = time_us;
  row.algbw = time_us > 0 ? bytes / time_us / 1e3 : 0;
  row.busbw = busbw;
  return row;
}

int Main(const Flags& flags) {
  const int n = std::max(1, flags.threads);
  std::vector<Buffers> buffers;
  const size_t max_count = flags.sizes.max_bytes / sizeof(float) + 16;
  for (int t = 0; t < n; ++t) buffers.emplace_back(max_count);

  std::vector<Row> rows;
  std::printf("# syncline-bench-membw: %d threads at once, f32\n", n);
  std::printf("#%14s %10s %10s %9s %9s %12s %12s %12s\n", "size", "sum", "copy", "sum",
              "copy", "allreduce", "allgather", "broadcast");
  std::printf("#%14s %10s %10s %9s %9s %12s %12s %12s\n", "(B)", "(us)", "(us)", "(GB/s)",
              "(GB/s)", "bound busbw", "bound busbw", "bound busbw");
  const double share = n > 1 ? static_cast<double>(n - 1) / n : 1.0;
  for (size_t bytes : Sizes(flags.sizes)) {
    const size_t part = std::max<size_t>(static_cast<size_t>(bytes * share), sizeof(float));
    const double sum_full = TimeKernel(Kernel::kSum, &buffers, bytes, flags.repetitions);
    const double copy_full = TimeKernel(Kernel::kCopy, &buffers, bytes, flags.repetitions);
    const double sum_part = TimeKernel(Kernel::kSum, &buffers, part, flags.repetitions);
    const double copy_part = TimeKernel(Kernel::kCopy, &buffers, part, flags.repetitions);
    const double gb = static_cast<double>(bytes) / 1e3;  // bytes / us -> GB/s
    const double allreduce_t = sum_part + copy_part;
    const double allreduce_bw = BusFactor(Op::kAllreduce, n) * gb / allreduce_t;
    const double allgather_bw = BusFactor(Op::kAllgather, n) * gb / copy_part;
    const double broadcast_bw = gb / copy_full;
    std::printf(" %14zu %10.2f %10.2f %9.2f %9.2f %12.2f %12.2f %12.2f\n", bytes, sum_full,
                copy_full, gb / sum_full, gb / copy_full, allreduce_bw, allgather_bw,
                broadcast_bw);
    rows.push_back(MakeRow("membw-sum", "sum", n, bytes, sum_full, gb / sum_full));
    rows.push_back(MakeRow("membw-copy", "copy", n, bytes, copy_full, gb / copy_full));
    rows.push_back(MakeRow("membw-bound", "allreduce", n, bytes, allreduce_t, allreduce_bw));
    rows.push_back(MakeRow("membw-bound", "allgather", n, bytes, copy_part, allgather_bw));
    rows.push_back(MakeRow("membw-bound", "broadcast", n, bytes, copy_full, broadcast_bw));
    std::fflush(stdout);
  }
  if (!flags.json.empty() && !WriteRowsJson(flags.json, "syncline-bench-membw", rows)) {
    std::fprintf(stderr, "membw: cannot write %s\n", flags.json.c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace syncline::bench

int main(int argc, char** argv) {
  syncline::cli::Usage usage;
  usage.program = "syncline-bench-membw";
  usage.description =
      "The memory-bandwidth bound of a collective on this machine: times a sum and a "
      "copy kernel on --threads threads at once (one per rank, sharing the memory bus "
      "as the ranks would) and derives the busbw that allreduce, allgather and "
      "broadcast through memory could reach. Sizes and iterations follow bench/common.";
  std::vector<syncline::cli::Option> options = {
      {"--threads=N", "", "Threads at once, one per simulated rank.", "2"}};
  syncline::bench::AppendSharedOptions(
      {"min_bytes", "max_bytes", "factor", "repetitions", "json"}, &options);
  if (syncline::cli::PrintHelpIfAsked(argc, argv, usage, options)) return 0;
  syncline::bench::Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--threads") {
      flags.threads = std::atoi(value.c_str());
    } else if (key == "--min_bytes" || key == "--max_bytes") {
      auto bytes = syncline::bench::ParseBytes(value);
      if (!bytes) return 2;
      (key == "--min_bytes" ? flags.sizes.min_bytes : flags.sizes.max_bytes) = *bytes;
    } else if (key == "--factor") {
      flags.sizes.factor = std::atoi(value.c_str());
    } else if (key == "--repetitions") {
      flags.repetitions = std::max(1, std::atoi(value.c_str()));
    } else if (key == "--json") {
      flags.json = value;
    } else {
      std::fprintf(stderr, "membw: unknown flag %s (see the file comment)\n", arg.c_str());
      return 2;
    }
  }
  return syncline::bench::Main(flags);
}
