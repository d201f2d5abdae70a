// syncline-run: starts N ranks of a distributed program and supervises them.
//
//   syncline-run -n 4 -- ./train --epochs=1
//   syncline-run -n 8 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1
//       --master-port 29500 ./train     (one line; the same on node 1 with
//                                        --node-rank 1)
//
// Flags may be spelled with dashes or underscores (--node-rank,
// --node_rank), as torchrun accepts both. The program starts at "--" or at
// the first argument that is not a launcher flag, so the program's own flags
// are never taken for ours.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "launcher.h"
#include "output.h"
#include "supervisor.h"
#include "syncline/env.h"
#include "tools/cli/usage.h"

ABSL_FLAG(int, n, 1, "Number of workers (ranks) to start on this node.");
ABSL_FLAG(int, nnodes, 1, "Number of nodes; WORLD_SIZE is n * nnodes.");
ABSL_FLAG(int, node_rank, 0, "This node's index in 0..nnodes-1; node 0 hosts the store.");
ABSL_FLAG(std::string, master_addr, "127.0.0.1",
          "Address of the store. On node 0 it is also the bind address, so "
          "use this host's address (not 0.0.0.0) for multi-node jobs.");
ABSL_FLAG(int, master_port, 0, "Port of the store; 0 picks a free one (node 0 only).");
ABSL_FLAG(int, max_restarts, 0, "How many times to restart all workers after a failure.");
ABSL_FLAG(std::string, job_id, "",
          "Identity of the job (alias --rdzv-id, as in torchrun); ranks of "
          "another job on the same store are refused. Default: SYNCLINE_JOB_ID, "
          "TORCHELASTIC_RUN_ID or the Slurm/OpenMPI job id, else a random id "
          "drawn by node 0 and shared with every node.");
ABSL_FLAG(double, grace_period, 5.0,
          "Seconds between SIGTERM and SIGKILL when stopping workers.");
ABSL_FLAG(bool, help_env, false, "Print Syncline's environment variables and exit.");
ABSL_FLAG(bool, markdown, false,
          "With --help-env: print the variables as the Markdown table of README.md.");

namespace {

syncline::cli::Usage LauncherUsage() {
  syncline::cli::Usage usage;
  usage.program = "syncline-run";
  usage.positional = "[--] program [args...]";
  usage.description =
      "Starts N ranks of a distributed program on this node and supervises them, "
      "like torchrun.\n\n"
      "Each worker gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, "
      "MASTER_ADDR, MASTER_PORT, SYNCLINE_JOB_ID and SYNCLINE_STORE_TOKEN, and "
      "OMP_NUM_THREADS when it is unset. Output lines are prefixed with [rank r]. When "
      "a worker fails the others are stopped and a summary names the rank whose "
      "failure started it.";
  usage.epilog =
      "Examples: syncline-run -n 2 syncline-train; on two nodes, each runs "
      "syncline-run -n 8 --nnodes 2 --node-rank <0|1> --master-addr <node 0's address> "
      "--master-port 29500 with the same SYNCLINE_STORE_TOKEN exported, then the "
      "program.\n\n"
      "See --help-env for Syncline's environment variables.";
  usage.aliases = {{"n", "--nproc-per-node"}, {"job_id", "--rdzv-id"}};
  return usage;
}

// Flags that take a value, so that "--node-rank 1" consumes the "1"; any
// other flag (--help_env, --help) takes none and cannot swallow the program.
bool TakesValue(const std::string& name) {
  for (const char* f :
       {"n", "nnodes", "node_rank", "master_addr", "master_port", "max_restarts",
        "grace_period", "job_id", "flagfile", "fromenv", "tryfromenv", "undefok"}) {
    if (name == f) return true;
  }
  return false;
}

// Splits argv into the launcher's arguments (normalized to "--name[=value]"
// with underscores) and the program's command line.
void SplitCommandLine(int argc, char** argv, std::vector<std::string>* ours,
                      std::vector<std::string>* command) {
  ours->push_back(argv[0]);
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program starts here
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    size_t eq = body.find('=');
    std::string name = body.substr(0, eq);
    name = absl::StrReplaceAll(name, {{"-", "_"}});
    if (name == "nproc_per_node") name = "n";  // torchrun's spelling
    if (name == "rdzv_id") name = "job_id";    // torchrun's spelling
    if (eq != std::string::npos) {
      ours->push_back(absl::StrCat("--", name, body.substr(eq)));
      continue;
    }
    ours->push_back(absl::StrCat("--", name));
    if (TakesValue(name) && i + 1 < argc) {
      ours->back() += absl::StrCat("=", argv[++i]);
    }
  }
  for (; i < argc; ++i) command->push_back(argv[i]);
}

}  // namespace

int main(int argc, char** argv) {
  // Re-executed by syncline-run itself to supervise one worker.
  if (argc > 1 && std::string(argv[1]) == syncline::run::kSuperviseFlag) {
    return syncline::run::RunSupervisor(argc, argv);
  }
  absl::SetProgramUsageMessage("Starts N ranks of a distributed program (see --help).");
  // absl's --help lists the flags of files named after the program; ours
  // live in syncline_run/main.cc.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "syncline_run/");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> ours;
  std::vector<std::string> command;
  SplitCommandLine(argc, argv, &ours, &command);
  if (syncline::cli::PrintHelpIfAsked(ours, LauncherUsage(), "syncline_run/")) return 0;
  std::vector<char*> our_argv;
  our_argv.reserve(ours.size() + 1);
  for (std::string& s : ours) our_argv.push_back(s.data());
  our_argv.push_back(nullptr);
  std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(ours.size()), our_argv.data());
  if (rest.size() > 1) {
    syncline::run::Say(absl::StrCat("unexpected argument '", rest[1], "'"));
    return 2;
  }

  if (absl::GetFlag(FLAGS_help_env)) {
    std::string table = syncline::FormatEnvTable(absl::GetFlag(FLAGS_markdown));
    syncline::run::WriteAll(STDOUT_FILENO, table);
    if (!table.empty() && table.back() != '\n') {
      syncline::run::WriteAll(STDOUT_FILENO, "\n");
    }
    return 0;
  }

  syncline::run::LaunchOptions options;
  options.nproc_per_node = absl::GetFlag(FLAGS_n);
  options.nnodes = absl::GetFlag(FLAGS_nnodes);
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.master_addr = absl::GetFlag(FLAGS_master_addr);
  options.master_port = absl::GetFlag(FLAGS_master_port);
  options.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  options.job_id = absl::GetFlag(FLAGS_job_id);
  double grace = absl::GetFlag(FLAGS_grace_period);
  options.grace_period = std::isfinite(grace) ? absl::Seconds(grace) : absl::Seconds(-1);
  options.command = std::move(command);
  return syncline::run::RunLauncher(options);
}
