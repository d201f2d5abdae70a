// syncline-bench-raw-gloo: Gloo called directly, the reference for
// Syncline's gloo backend.
//
// It makes the same calls the backend makes (backends/gloo/ops.cc): a TCP
// device on 127.0.0.1, a rendezvous::Context connected with connectFullMesh,
// then gloo::allreduce (out of place, with a reduce function), gloo::allgather
// and gloo::broadcast (in place, root 0), each with a tag and a timeout. The
// rendezvous goes through Gloo's own FileStore in a temporary folder. What
// differs from Syncline is only Syncline's layer: the C ABI, the Work object
// and the backend's worker thread. Ranks are this program re-executed
// (fork+exec), sizes, iterations and rows follow bench/common.
//
// Usage:
//   syncline-bench-raw-gloo [--world_size=2] [--ops=allreduce,allgather,broadcast]
//       [--min_bytes=8] [--max_bytes=64M] [--factor=4] [--warmup=2]
//       [--warmup_ms=20] [--repetitions=5] [--json=FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/help.h"
#include "bench/common/spawn.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/broadcast.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace syncline::bench {
namespace {

constexpr std::chrono::seconds kTimeout(120);

struct Flags {
  int world_size = 2;
  std::vector<Op> ops = {Op::kAllreduce, Op::kAllgather, Op::kBroadcast};
  SizeSchedule sizes;
  int warmup = 2;
  double warmup_ms = kDefaultWarmupMs;
  int repetitions = 5;
  std::string json;
  int rank = -1;          // set in the rank processes
  std::string store_dir;  // likewise
};

// --help, in the layout of syncline-run's (tools/cli).
bool PrintHelpIfAsked(int argc, char** argv) {
  cli::Usage usage;
  usage.program = "syncline-bench-raw-gloo";
  usage.description =
      "Gloo called directly, the reference for Syncline's gloo backend: the same "
      "calls the backend makes, over a TCP device on 127.0.0.1, on ranks that are this "
      "program re-executed. Sizes, iterations and rows follow bench/common.";
  std::vector<cli::Option> options = {
      {"--world_size=N", "", "Ranks to start.", "2"},
      {"--ops=LIST", "", "Of allreduce, allgather, broadcast.",
       "allreduce,allgather,broadcast"},
  };
  AppendSharedOptions({"min_bytes", "max_bytes", "factor", "warmup", "warmup_ms", "repetitions",
                       "json"},
                      &options);
  return cli::PrintHelpIfAsked(argc, argv, usage, options);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--world_size") {
      flags.world_size = std::atoi(value.c_str());
    } else if (key == "--ops") {
      flags.ops.clear();
      for (const std::string& name : SplitList(value)) {
        auto op = ParseOp(name);
        if (!op ||
            (*op != Op::kAllreduce && *op != Op::kAllgather && *op != Op::kBroadcast)) {
          std::fprintf(stderr, "raw-gloo: op %s is not measured here\n", name.c_str());
          std::exit(2);
        }
        flags.ops.push_back(*op);
      }
    } else if (key == "--min_bytes" || key == "--max_bytes") {
      auto bytes = ParseBytes(value);
      if (!bytes) std::exit(2);
      (key == "--min_bytes" ? flags.sizes.min_bytes : flags.sizes.max_bytes) = *bytes;
    } else if (key == "--factor") {
      flags.sizes.factor = std::atoi(value.c_str());
    } else if (key == "--warmup") {
      flags.warmup = std::max(1, std::atoi(value.c_str()));
    } else if (key == "--warmup_ms") {
      flags.warmup_ms = std::atof(value.c_str());
    } else if (key == "--repetitions") {
      flags.repetitions = std::max(1, std::atoi(value.c_str()));
    } else if (key == "--json") {
      flags.json = value;
    } else if (key == "--rank") {
      flags.rank = std::atoi(value.c_str());
    } else if (key == "--store_dir") {
      flags.store_dir = value;
    } else {
      std::fprintf(stderr, "raw-gloo: unknown flag %s (see the file comment)\n", arg.c_str());
      std::exit(2);
    }
  }
  return flags;
}

// Rank r's element i, as in bench/collectives/data.cc: small integers.
float InputValue(int rank, size_t i) {
  return static_cast<float>((i * 5 + static_cast<size_t>(rank) * 3 + 1) % 8);
}

void SumFloats(void* out, const void* a, const void* b, size_t n) {
  float* o = static_cast<float*>(out);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

class RawGloo {
 public:
  explicit RawGloo(std::shared_ptr<::gloo::Context> context) : context_(std::move(context)) {}

  // One op on `count` f32 elements (the op's largest buffer).
  void Run(Op op, float* send, float* recv, size_t count) {
    const int n = context_->size;
    switch (op) {
      case Op::kAllreduce: {
        ::gloo::AllreduceOptions options(context_);
        options.setInput(send, count);
        options.setOutput(recv, count);
        options.setReduceFunction(&SumFloats);
        Finish(options);
        ::gloo::allreduce(options);
        return;
      }
      case Op::kAllgather: {
        ::gloo::AllgatherOptions options(context_);
        options.setInput(send, count / n);
        options.setOutput(recv, count);
        Finish(options);
        ::gloo::allgather(options);
        return;
      }
      default: {
        ::gloo::BroadcastOptions options(context_);
        options.setOutput(recv, count);
        options.setRoot(0);
        Finish(options);
        ::gloo::broadcast(options);
        return;
      }
    }
  }

  // The slowest rank's value of each entry.
  std::vector<double> Max(std::vector<double> values) {
    ::gloo::AllreduceOptions options(context_);
    options.setOutput(values.data(), values.size());
    options.setReduceFunction(&MaxOfDoubles);
    Finish(options);
    ::gloo::allreduce(options);
    return values;
  }

 private:
  template <typename Options>
  void Finish(Options& options) {
    options.setTag(tag_++);
    options.setTimeout(kTimeout);
  }

  std::shared_ptr<::gloo::Context> context_;
  uint32_t tag_ = 1;
};

int64_t CountWrong(Op op, int rank, int n, const float* recv, size_t count) {
  int64_t wrong = 0;
  const size_t block = count / static_cast<size_t>(n);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    if (op == Op::kAllreduce) {
      for (int r = 0; r < n; ++r) want += InputValue(r, i);
    } else if (op == Op::kAllgather) {
      want = InputValue(static_cast<int>(i / block), i % block);
    } else {
      want = InputValue(0, i);
    }
    if (recv[i] != want) ++wrong;
  }
  (void)rank;
  return wrong;
}

int RunRank(const Flags& flags) {
  const int n = flags.world_size;
  ::gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = ::gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<::gloo::rendezvous::Context>(flags.rank, n);
  context->setTimeout(kTimeout);
  ::gloo::rendezvous::FileStore store(flags.store_dir);
  context->connectFullMesh(store, device);
  RawGloo gloo(context);

  const size_t max_count = std::max<size_t>(flags.sizes.max_bytes / sizeof(float), 1) + n;
  std::vector<float> send(max_count), recv(max_count);
  std::vector<Row> rows;
  if (flags.rank == 0) std::printf("# raw-gloo: %d ranks, TCP on 127.0.0.1\n", n);
  for (Op op : flags.ops) {
    if (flags.rank == 0) std::printf("\n# raw-gloo, %d ranks, %s, f32\n%s\n", n, OpName(op), TableHeader().c_str());
    for (size_t bytes : Sizes(flags.sizes)) {
      size_t count = std::max<size_t>(bytes / sizeof(float), 1);
      if (op == Op::kAllgather) count = std::max<size_t>(count / n, 1) * n;
      const size_t block = op == Op::kAllgather ? count / n : count;
      for (size_t i = 0; i < block; ++i) send[i] = InputValue(flags.rank, i);
      if (op == Op::kBroadcast && flags.rank == 0) std::copy_n(send.begin(), count, recv.begin());
      int64_t wrong = 0;
      const int iters = IterationsFor(count * sizeof(float));
      std::vector<double> rep_us;
      for (int rep = 0; rep < flags.repetitions; ++rep) {
        if (op != Op::kBroadcast || flags.rank != 0) std::fill_n(recv.begin(), count, -1.0f);
        gloo.Run(op, send.data(), recv.data(), count);
        wrong += CountWrong(op, flags.rank, n, recv.data(), count);
        for (int w = 1; w < flags.warmup; ++w) gloo.Run(op, send.data(), recv.data(), count);
        WarmFor(
            flags.warmup_ms, [&] { gloo.Run(op, send.data(), recv.data(), count); },
            [&](bool done) { return gloo.Max({done ? 0.0 : 1.0})[0] == 0; });
        const auto start = std::chrono::steady_clock::now();
        for (int it = 0; it < iters; ++it) gloo.Run(op, send.data(), recv.data(), count);
        rep_us.push_back(std::chrono::duration<double, std::micro>(
                             std::chrono::steady_clock::now() - start).count() / iters);
      }
      wrong += CountWrong(op, flags.rank, n, recv.data(), count);
      rep_us.push_back(static_cast<double>(wrong));
      rep_us = gloo.Max(rep_us);
      Row row;
      row.system = "raw-gloo";
      row.op = OpName(op);
      row.dtype = "f32";
      row.redop = op == Op::kAllreduce ? "sum" : "none";
      row.ranks = n;
      row.bytes = count * sizeof(float);
      row.count = count;
      row.wrong = static_cast<int64_t>(rep_us.back());
      rep_us.pop_back();
      row.time_us = Median(rep_us);
      ComputeBandwidth(&row);
      rows.push_back(row);
      if (flags.rank == 0) std::printf("%s\n", TableLine(row).c_str());
      std::fflush(stdout);
    }
  }
  if (flags.rank == 0 && !flags.json.empty() &&
      !WriteRowsJson(flags.json, "syncline-bench-raw-gloo", rows)) {
    std::fprintf(stderr, "raw-gloo: cannot write %s\n", flags.json.c_str());
    return 1;
  }
  for (const Row& row : rows) {
    if (row.wrong > 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace syncline::bench

int main(int argc, char** argv) {
  if (syncline::bench::PrintHelpIfAsked(argc, argv)) return 0;
  const syncline::bench::Flags flags = syncline::bench::ParseFlags(argc, argv);
  if (flags.rank < 0) {
    return syncline::bench::LaunchRanksInTempDir("raw-gloo", flags.world_size, "--store_dir",
                                                 argc, argv);
  }
  return syncline::bench::RunRank(flags);
}
