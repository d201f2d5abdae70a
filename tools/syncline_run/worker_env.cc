#include "worker_env.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace syncline::run {
namespace {

absl::string_view NameOf(absl::string_view entry) {
  return entry.substr(0, entry.find('='));
}

bool Contains(const std::vector<absl::string_view>& names, absl::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

const std::vector<absl::string_view>& LauncherVariables() {
  static const auto* const kNames =
      new std::vector<absl::string_view>{"RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_RANK",
                                         "LOCAL_WORLD_SIZE",
                                         "GROUP_RANK",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "SYNCLINE_STORE_HOSTED",
                                         "SYNCLINE_STORE_PREFIX",
                                         "SYNCLINE_RESTART_COUNT",
                                         "SYNCLINE_STORE_TOKEN",
                                         "SYNCLINE_JOB_ID",
                                         "SYNCLINE_NODE_CHECKED_IN"};
  return *kNames;
}

const std::vector<absl::string_view>& OverridingVariables() {
  static const auto* const kNames = new std::vector<absl::string_view>{
      "SYNCLINE_RANK",        "SYNCLINE_WORLD_SIZE",
      "SYNCLINE_LOCAL_RANK",  "SYNCLINE_LOCAL_WORLD_SIZE",
      "SYNCLINE_MASTER_ADDR", "SYNCLINE_MASTER_PORT"};
  return *kNames;
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    env.emplace_back(*e);
  }
  return env;
}

std::vector<std::string> BuildWorkerEnv(const std::vector<std::string>& base,
                                        const WorkerEnvOptions& o) {
  std::vector<std::string> env;
  env.reserve(base.size() + LauncherVariables().size() + 1);
  for (const std::string& entry : base) {
    absl::string_view name = NameOf(entry);
    if (Contains(LauncherVariables(), name) || Contains(OverridingVariables(), name)) {
      continue;
    }
    if (name == "OMP_NUM_THREADS" && o.omp_num_threads > 0) continue;
    env.push_back(entry);
  }
  int rank = o.node_rank * o.nproc_per_node + o.local_rank;
  env.push_back(absl::StrCat("RANK=", rank));
  env.push_back(absl::StrCat("WORLD_SIZE=", o.nproc_per_node * o.nnodes));
  env.push_back(absl::StrCat("LOCAL_RANK=", o.local_rank));
  env.push_back(absl::StrCat("LOCAL_WORLD_SIZE=", o.nproc_per_node));
  env.push_back(absl::StrCat("GROUP_RANK=", o.node_rank));
  env.push_back(absl::StrCat("MASTER_ADDR=", o.master_addr));
  env.push_back(absl::StrCat("MASTER_PORT=", o.master_port));
  env.push_back("SYNCLINE_STORE_HOSTED=1");
  env.push_back(
      absl::StrCat("SYNCLINE_STORE_PREFIX=", GenerationPrefix(o.restart_count)));
  env.push_back(absl::StrCat("SYNCLINE_RESTART_COUNT=", o.restart_count));
  if (!o.job_id.empty()) env.push_back(absl::StrCat("SYNCLINE_JOB_ID=", o.job_id));
  if (!o.store_token.empty()) {
    env.push_back(absl::StrCat("SYNCLINE_STORE_TOKEN=", o.store_token));
  }
  if (o.node_checked_in) env.push_back("SYNCLINE_NODE_CHECKED_IN=1");
  if (o.omp_num_threads > 0) {
    env.push_back(absl::StrCat("OMP_NUM_THREADS=", o.omp_num_threads));
  }
  return env;
}

std::string GenerationPrefix(int generation) {
  return absl::StrCat("gen", generation, "/");
}

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    return std::max(1, CPU_COUNT(&set));
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int DefaultOmpThreads(int local_world_size) {
  return std::max(1, UsableCores() / std::max(1, local_world_size));
}

}  // namespace syncline::run
