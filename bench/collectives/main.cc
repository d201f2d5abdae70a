// syncline-bench-collectives: nccl-tests-style tables for Syncline's
// collectives, measured through the public Communicator API.
//
// Usage:
//   syncline-bench-collectives [--backends=gloo,ucx] [--world_sizes=2,3,4]
//       [--ops=allreduce,allgather,reduce_scatter,broadcast,alltoall,reduce]
//       [--dtypes=f32,bf16,...] [--redop=sum|min|max|avg]
//       [--min_bytes=8] [--max_bytes=64M] [--factor=4] [--fine]
//       [--warmup=2] [--warmup_ms=20] [--repetitions=5] [--timeout_s=120] [--json=FILE]
//       [--backend_options="key=value;..."] [--system_suffix=/label]
//       [--in_place] [--variant=LABEL:"key=value;..." ...]
//       [--benchmark_* flags of Google Benchmark]
//
// Without a rendezvous in the environment it is its own launcher: for each
// world size it hosts a TcpStoreServer on 127.0.0.1 and starts that many
// ranks of itself (fork+exec). Under syncline-run, torchrun-style variables
// or mpirun it runs as one rank of that job (one world size). --fine sets the
// size factor to 2. --json writes every row (all backends and world sizes).
// --backend_options goes to every backend (e.g. "allreduce_small_max=0"
// forces the UCX backend's ring), and --system_suffix labels such a run's
// rows ("syncline-ucx/ring"). --variant (repeatable) measures several
// option sets in one job, their repetitions interleaved: e.g.
//   --backends=ucx --variant=rd:allreduce_small_max=1g
//   --variant=ring:allreduce_small_max=0
// gives rows "syncline-ucx/rd" and "syncline-ucx/ring", each the median of
// its repetitions, with every row's repetitions in "samples_us".
// --in_place runs allreduce into its own input (torch's all_reduce has no
// other form): the comparison for the Python path's rows.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bench/collectives/rank.h"
#include "bench/common/bench_common.h"
#include "bench/common/help.h"
#include "bench/common/spawn.h"
#include "syncline/rendezvous.h"
#include "syncline/tcp_store.h"

namespace syncline::bench {
namespace {

constexpr const char* kRowsEnv = "SYNCLINE_BENCH_ROWS_FILE";

bool InJob() {
  for (const char* name : {"SYNCLINE_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS",
                           "OMPI_COMM_WORLD_SIZE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

// --help, in the layout of syncline-run's (tools/cli).
bool PrintHelpIfAsked(int argc, char** argv) {
  cli::Usage usage;
  usage.program = "syncline-bench-collectives";
  usage.positional = "[--benchmark_*...]";
  usage.description =
      "nccl-tests-style tables (size, count, dtype, time, algbw, busbw) for Syncline's "
      "collectives, measured through the public Communicator API.\n\n"
      "Without a rendezvous in the environment it is its own launcher: for each world "
      "size it hosts a store on 127.0.0.1 and starts that many ranks of itself. Under "
      "syncline-run, torchrun-style variables or mpirun it runs as one rank of that job.";
  usage.epilog =
      "Other --benchmark_* flags go to Google Benchmark. Example: "
      "syncline-bench-collectives --backends=gloo,ucx --world_sizes=2,4 --ops=allreduce";
  std::vector<cli::Option> options = {
      {"--backends=LIST", "", "Backends to measure, e.g. gloo,ucx.", "gloo"},
      {"--world_sizes=LIST", "", "World sizes to launch (as its own launcher).", "2"},
      {"--ops=LIST", "",
       "Of allreduce, allgather, reduce_scatter, broadcast, alltoall, reduce.",
       "allreduce,allgather,reduce_scatter,broadcast,alltoall"},
      {"--dtypes=LIST", "", "Of f32, f64, f16, bf16, i8, u8, i32, i64.", "f32"},
      {"--redop=OP", "", "sum, min, max or avg.", "sum"},
  };
  AppendSharedOptions({"min_bytes", "max_bytes", "factor"}, &options);
  options.push_back({"--fine", "", "Sets --factor=2.", ""});
  AppendSharedOptions({"warmup", "warmup_ms", "repetitions"}, &options);
  options.push_back({"--timeout_s=SECONDS", "", "Deadline of every op.", "120"});
  AppendSharedOptions({"json"}, &options);
  options.push_back({"--backend_options=\"k=v;...\"", "",
                     "Passed to every backend, e.g. \"allreduce_small_max=0\".", ""});
  options.push_back({"--system_suffix=/LABEL", "", "Appended to the rows' system name.", ""});
  options.push_back({"--in_place", "",
                     "Allreduce into its own input, as torch's all_reduce and DDP's "
                     "buckets do (label the rows with --system_suffix).",
                     ""});
  options.push_back({"--variant=LABEL:\"k=v;...\"", "",
                     "Repeatable: measure several option sets in one job, their "
                     "repetitions interleaved; rows are named syncline-<backend>/LABEL.",
                     ""});
  return cli::PrintHelpIfAsked(argc, argv, usage, options);
}

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "syncline-bench-collectives: %s\n"
               "usage: syncline-bench-collectives [--backends=gloo,ucx] "
               "[--world_sizes=2] [--ops=LIST] [--dtypes=LIST] [--redop=sum]\n"
               "  [--min_bytes=8] [--max_bytes=64M] [--factor=4] [--fine] [--warmup=2]\n"
               "  [--warmup_ms=20] [--repetitions=5] [--timeout_s=120] [--json=FILE]\n"
               "  [--backend_options=\"k=v;...\"] [--system_suffix=/label] [--in_place]\n"
               "  [--variant=LABEL:\"k=v;...\" ...] [--benchmark_*...]\n",
               why.c_str());
  std::exit(2);
}

// Parses our flags into `config`; everything else is kept in `rest` for
// Google Benchmark (which rejects what it does not know).
BenchConfig ParseFlags(int argc, char** argv, std::vector<std::string>* rest) {
  BenchConfig config;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    auto bytes = [&]() {
      auto parsed = ParseBytes(value);
      if (!parsed) Usage("bad size in " + arg);
      return *parsed;
    };
    if (key == "--backends") {
      config.backends = SplitList(value);
    } else if (key == "--world_sizes") {
      config.world_sizes.clear();
      for (const std::string& n : SplitList(value)) config.world_sizes.push_back(std::atoi(n.c_str()));
    } else if (key == "--ops") {
      config.ops.clear();
      for (const std::string& name : SplitList(value)) {
        auto op = ParseOp(name);
        if (!op) Usage("unknown op " + name);
        config.ops.push_back(*op);
      }
    } else if (key == "--dtypes") {
      config.dtypes.clear();
      for (const std::string& name : SplitList(value)) {
        auto dtype = ParseDataType(name);
        if (!dtype) Usage("unknown dtype " + name);
        config.dtypes.push_back(*dtype);
      }
    } else if (key == "--redop") {
      const std::vector<std::pair<std::string, ReduceOp>> kRedops = {
          {"sum", ReduceOp::kSum}, {"min", ReduceOp::kMin},
          {"max", ReduceOp::kMax}, {"avg", ReduceOp::kAvg}};
      bool found = false;
      for (const auto& [name, op] : kRedops) {
        if (value == name) {
          config.redop = op;
          found = true;
        }
      }
      if (!found) Usage("--redop must be sum, min, max or avg (prod overflows the oracle)");
    } else if (key == "--min_bytes") {
      config.sizes.min_bytes = bytes();
    } else if (key == "--max_bytes") {
      config.sizes.max_bytes = bytes();
    } else if (key == "--factor") {
      config.sizes.factor = std::atoi(value.c_str());
    } else if (key == "--fine") {
      config.sizes.factor = 2;
    } else if (key == "--warmup") {
      config.warmup = std::atoi(value.c_str());
    } else if (key == "--warmup_ms") {
      config.warmup_ms = std::atof(value.c_str());
    } else if (key == "--repetitions") {
      config.repetitions = std::atoi(value.c_str());
    } else if (key == "--timeout_s") {
      config.timeout_s = std::atof(value.c_str());
    } else if (key == "--json") {
      config.json = value;
    } else if (key == "--backend_options") {
      config.backend_options = value;
    } else if (key == "--system_suffix") {
      config.system_suffix = value;
    } else if (key == "--in_place") {
      config.in_place = true;
    } else if (key == "--variant") {
      const size_t colon = value.find(':');
      if (colon == 0 || colon == std::string::npos)
        Usage("--variant needs LABEL:OPTIONS");
      config.variants.push_back({value.substr(0, colon), value.substr(colon + 1)});
    } else if (arg.rfind("--benchmark_", 0) == 0) {
      rest->push_back(arg);
    } else {
      Usage("unknown flag " + arg);
    }
  }
  if (config.backends.empty() || config.ops.empty() || config.dtypes.empty()) {
    Usage("empty --backends, --ops or --dtypes");
  }
  if (config.sizes.factor < 2 || config.sizes.min_bytes > config.sizes.max_bytes) {
    Usage("need --factor >= 2 and --min_bytes <= --max_bytes");
  }
  for (int n : config.world_sizes) {
    if (n < 1) Usage("world sizes must be >= 1");
  }
  return config;
}

// Appends the row lines of a rows file (WriteRowsJson writes one row per
// line starting with "  {") to `rows`.
void CollectRowLines(const std::string& path, std::vector<std::string>* rows) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  {", 0) != 0) continue;
    if (!line.empty() && line.back() == ',') line.pop_back();
    rows->push_back(line);
  }
}

int Launch(const BenchConfig& config, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> row_lines;
  int exit_code = 0;
  for (int n : config.world_sizes) {
    TcpStoreServerOptions server_options;
    const char* token = std::getenv("SYNCLINE_STORE_TOKEN");  // the ranks present it
    if (token != nullptr) server_options.token = token;
    auto server = TcpStoreServer::Start(server_options);
    if (!server.ok()) {
      std::fprintf(stderr, "syncline-bench-collectives: %s\n",
                   server.status().ToString().c_str());
      return 1;
    }
    const std::string rows_path = "/tmp/syncline-bench-rows-" + std::to_string(getpid()) +
                                  "-" + std::to_string(n) + ".json";
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) {
      pids.push_back(SpawnSelf(
          args,
          {"SYNCLINE_RANK=" + std::to_string(r), "SYNCLINE_WORLD_SIZE=" + std::to_string(n),
           "SYNCLINE_LOCAL_RANK=" + std::to_string(r),
           "SYNCLINE_LOCAL_WORLD_SIZE=" + std::to_string(n), "MASTER_ADDR=127.0.0.1",
           "MASTER_PORT=" + std::to_string((*server)->port()), "SYNCLINE_STORE_HOSTED=1",
           std::string(kRowsEnv) + "=" + rows_path},
          /*show_stdout=*/r == 0));
    }
    std::string why;
    // Generous: every case is bounded by its op timeout anyway.
    if (!WaitAll(pids, 3 * config.timeout_s + 600, &why)) {
      std::fprintf(stderr, "syncline-bench-collectives: %d ranks: %s\n", n, why.c_str());
      exit_code = 1;
    }
    CollectRowLines(rows_path, &row_lines);
    std::remove(rows_path.c_str());
  }
  if (!config.json.empty()) {
    std::ofstream out(config.json, std::ios::trunc);
    out << "{\"program\": \"syncline-bench-collectives\", \"rows\": [\n";
    for (size_t i = 0; i < row_lines.size(); ++i) {
      out << row_lines[i] << (i + 1 < row_lines.size() ? ",\n" : "\n");
    }
    out << "]}\n";
    if (!out) {
      std::fprintf(stderr, "syncline-bench-collectives: cannot write %s\n", config.json.c_str());
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace
}  // namespace syncline::bench

int main(int argc, char** argv) {
  using namespace syncline::bench;
  if (PrintHelpIfAsked(argc, argv)) return 0;
  std::vector<std::string> rest;
  const BenchConfig config = ParseFlags(argc, argv, &rest);
  if (!InJob()) return Launch(config, argc, argv);

  const char* rows_env = std::getenv(kRowsEnv);
  const std::string rows_path = rows_env != nullptr ? rows_env : config.json;
  // Only rank 0 reports; the others must not write Google Benchmark's files.
  // (A bad environment is reported by RunRank.)
  const auto info = syncline::ResolveRendezvous(-1, -1);
  const bool rank0 = !info.ok() || info->rank == 0;
  std::vector<std::string> gb_args = {argv[0]};
  for (const std::string& arg : rest) {
    if (rank0 || arg.rfind("--benchmark_out", 0) != 0) gb_args.push_back(arg);
  }
  std::vector<char*> gb_argv;
  for (std::string& arg : gb_args) gb_argv.push_back(arg.data());
  gb_argv.push_back(nullptr);
  int gb_argc = static_cast<int>(gb_args.size());
  return RunRank(config, &gb_argc, gb_argv.data(), rank0 ? rows_path : "");
}
