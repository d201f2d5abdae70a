// pitfalls.cc: once-only, rank-0 warnings with a fix, silenced by SYNCLINE_WARN.
#include "syncline/pitfalls.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "syncline/env.h"
#include "syncline/log.h"

namespace syncline {
namespace {

std::mutex g_mu;
std::set<int>* g_warned = new std::set<int>();  // never destroyed: used at exit

int UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

}  // namespace

const char* PitfallName(Pitfall p) {
  switch (p) {
    case Pitfall::kOversubscription: return "oversubscription";
    case Pitfall::kNoSyncMismatch: return "no_sync_mismatch";
    case Pitfall::kReplicaDrift: return "replica_drift";
    case Pitfall::kBucketCap: return "bucket_cap";
    case Pitfall::kVerboseLogging: return "verbose_logging";
    case Pitfall::kLoopbackInterface: return "loopback_interface";
  }
  return "unknown";
}

bool PitfallEnabled(Pitfall p) {
  for (absl::string_view name : absl::StrSplit(EnvString("SYNCLINE_WARN"), ',', absl::SkipEmpty())) {
    if (name == "all" || name == PitfallName(p)) return false;
  }
  return true;
}

bool WarnPitfall(Pitfall p, int rank, const std::string& message) {
  if (rank != 0 || !PitfallEnabled(p)) return false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_warned->insert(static_cast<int>(p)).second) return false;
  }
  LogMessage(LogLevel::kWarn, absl::StrCat("[pitfall ", PitfallName(p), "] ", message,
                                           " (silence with SYNCLINE_WARN=", PitfallName(p), ")"));
  return true;
}

bool CheckThreadOversubscription(int rank, int threads_per_rank, int local_ranks) {
  const int cores = UsableCores();
  if (threads_per_rank <= 0 || local_ranks <= 0 || threads_per_rank * local_ranks <= cores) {
    return false;
  }
  return WarnPitfall(
      Pitfall::kOversubscription, rank,
      absl::StrFormat("%d intra-op threads x %d local ranks = %d threads on %d cores: the "
                      "ranks will fight for cores and run slower than one process. Set "
                      "OMP_NUM_THREADS=%d (syncline-run does this when it is unset) or call "
                      "torch::set_num_threads(%d)",
                      threads_per_rank, local_ranks, threads_per_rank * local_ranks, cores,
                      std::max(1, cores / local_ranks), std::max(1, cores / local_ranks)));
}

void CheckStartupPitfalls(int rank, int world_size, int local_world_size) {
  int omp = 0;
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env != nullptr && absl::SimpleAtoi(env, &omp)) {
    CheckThreadOversubscription(rank, omp, local_world_size);
  }
  const bool all_ranks = EnvString("SYNCLINE_LOG_RANKS") == "all";
  const std::string level = EnvString("SYNCLINE_LOG_LEVEL");
  const bool chatty = level == "info" || level == "debug" || level == "trace";
  if (world_size >= 16 && all_ranks && chatty) {
    WarnPitfall(Pitfall::kVerboseLogging, rank,
                absl::StrFormat("SYNCLINE_LOG_RANKS=all at level %s on %d ranks floods the "
                                "logs and slows every rank; log from rank 0 only "
                                "(SYNCLINE_LOG_RANKS=0) or raise SYNCLINE_LOG_LEVEL to warn",
                                level, world_size));
  }
}

}  // namespace syncline
