// pitfalls.cc: once-only, rank-0 warnings with a fix, silenced by SYNCLINE_WARN.
#include "syncline/pitfalls.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "syncline/env.h"
#include "syncline/log.h"

extern char** environ;

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
    case Pitfall::kUnknownOption: return "unknown_option";
    case Pitfall::kIneffectiveOption: return "ineffective_option";
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
  if (threads_per_rank == 1) {
    // Threads cannot go lower: the advice is about ranks, not threads.
    return WarnPitfall(
        Pitfall::kOversubscription, rank,
        absl::StrFormat("%d local ranks on %d cores, with one intra-op thread each "
                        "already: there are more ranks than cores, so they take turns on "
                        "the cores and every collective waits for a descheduled rank. Run "
                        "at most %d ranks on this host (syncline-run -n %d) or give the "
                        "job more cores",
                        local_ranks, cores, cores, cores));
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

namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Variables of Syncline's own build, test and benchmark scripts.
bool IsToolingVariable(absl::string_view name) {
  for (absl::string_view prefix : {"SYNCLINE_TEST_", "SYNCLINE_BENCH_", "SYNCLINE_GPU_"}) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return name == "SYNCLINE_BUILD_DIR" || name == "SYNCLINE_JOBS" ||
         name == "SYNCLINE_ORPHAN_TEST";
}

// SYNCLINE_<NAME>_OPTIONS is read for whichever backend is chosen,
// including plugins Syncline does not ship.
bool IsBackendOptionsVariable(absl::string_view name) {
  return absl::EndsWith(name, "_OPTIONS") && name.size() > std::strlen("SYNCLINE__OPTIONS");
}

}  // namespace

std::string ClosestOption(const std::string& name) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const EnvOption& option : EnvOptions()) {
    const size_t d = EditDistance(name, option.name);
    if (d < best_distance) {
      best_distance = d;
      best = option.name;
    }
  }
  return best;
}

void CheckOptionPitfalls(int rank, const std::vector<std::string>& plugins) {
  if (rank != 0) return;
  std::set<std::string> known;
  for (const EnvOption& option : EnvOptions()) known.insert(option.name);
  std::vector<std::string> unknown;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry = *e;
    const std::string name(entry.substr(0, entry.find('=')));
    if (!absl::StartsWith(name, "SYNCLINE_") || known.count(name) > 0 ||
        IsToolingVariable(name) || IsBackendOptionsVariable(name)) {
      continue;
    }
    const std::string closest = ClosestOption(name);
    unknown.push_back(closest.empty()
                          ? absl::StrCat(name, " (no option is close to it)")
                          : absl::StrCat(name, " (did you mean ", closest, "?)"));
  }
  if (!unknown.empty()) {
    std::sort(unknown.begin(), unknown.end());
    WarnPitfall(Pitfall::kUnknownOption, rank,
                absl::StrCat("not Syncline options, so ignored: ", absl::StrJoin(unknown, ", "),
                             ". The options are listed by syncline-run --help-env and in the "
                             "README's option table"));
  }
  const bool check = std::find(plugins.begin(), plugins.end(), "check") != plugins.end();
  if (EnvString("SYNCLINE_CHECK_NAN") == "1" && !check) {
    WarnPitfall(Pitfall::kIneffectiveOption, rank,
                "SYNCLINE_CHECK_NAN=1 does nothing: the NaN/Inf scan is done by the check "
                "interposer, which is not loaded. Add it with SYNCLINE_PLUGINS=check (or "
                "SYNCLINE_DEBUG=detail)");
  }
}

}  // namespace syncline
