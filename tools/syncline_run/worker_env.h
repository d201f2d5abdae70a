// worker_env.h: the environment syncline-run gives each worker.
//
// A worker learns who it is from torchrun's variable names, so that programs
// written for torchrun run unchanged, plus Syncline's launcher variables:
//
//   RANK              node_rank * nproc_per_node + local_rank
//   WORLD_SIZE        nproc_per_node * nnodes
//   LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node rank)
//   MASTER_ADDR, MASTER_PORT   where the store listens (the real port)
//   SYNCLINE_STORE_HOSTED=1    the launcher hosts the store, rank 0 must not
//   SYNCLINE_STORE_PREFIX=gen<g>/ and SYNCLINE_RESTART_COUNT=<g>
//   SYNCLINE_STORE_TOKEN      the secret the store demands (see launcher.h)
//   SYNCLINE_JOB_ID           the job's identity, the same on every node
//   SYNCLINE_NODE_CHECKED_IN=1 the launcher checked this node's ranks in
//                             before starting them (node_check_in.h)
//   OMP_NUM_THREADS   only when the launcher's own environment lacks it
//
// Inherited SYNCLINE_RANK, SYNCLINE_WORLD_SIZE, ... are removed: the core
// gives them precedence over RANK, so a stale export in the user's shell
// would otherwise hand every worker the same rank.
//
// Example:
//   WorkerEnvOptions o{.local_rank = 1, .nproc_per_node = 4,
//                      .master_port = 29500};
//   std::vector<std::string> env = BuildWorkerEnv(CurrentEnvironment(), o);
#ifndef SYNCLINE_TOOLS_SYNCLINE_RUN_WORKER_ENV_H_
#define SYNCLINE_TOOLS_SYNCLINE_RUN_WORKER_ENV_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace syncline::run {

struct WorkerEnvOptions {
  int local_rank = 0;
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int restart_count = 0;
  int omp_num_threads = 0;  // 0: leave OMP_NUM_THREADS as inherited
  std::string store_token;  // the store's SYNCLINE_STORE_TOKEN
  std::string job_id;       // SYNCLINE_JOB_ID
  bool node_checked_in = false;  // SYNCLINE_NODE_CHECKED_IN=1
};

// The store prefix of generation `g`'s keys: "gen<g>/".
std::string GenerationPrefix(int generation);

// The variables the launcher sets itself; an inherited value of any of these
// is replaced.
const std::vector<absl::string_view>& LauncherVariables();

// Inherited variables that would override the launcher's assignment and are
// therefore dropped (see the file comment).
const std::vector<absl::string_view>& OverridingVariables();

// This process's environment as "NAME=value" strings.
std::vector<std::string> CurrentEnvironment();

// `base` without the launcher's and overriding variables, plus the
// launcher's variables for one worker.
std::vector<std::string> BuildWorkerEnv(const std::vector<std::string>& base,
                                        const WorkerEnvOptions& options);

// CPUs this process may run on (its affinity mask, which honours taskset and
// cgroup cpusets), at least 1.
int UsableCores();

// The OMP_NUM_THREADS default: the usable cores shared evenly by the local
// workers, at least 1 each, so that N ranks with OpenMP do not each start one
// thread per core and thrash.
int DefaultOmpThreads(int local_world_size);

}  // namespace syncline::run

#endif  // SYNCLINE_TOOLS_SYNCLINE_RUN_WORKER_ENV_H_
