// env.cc: the table of SYNCLINE_* options and typed access to it.
#include "syncline/env.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "syncline/status.h"

namespace syncline {

const std::vector<EnvOption>& EnvOptions() {
  static const std::vector<EnvOption> kOptions = {
      {"SYNCLINE_BACKEND", "auto",
       "Backend: gloo, ucx, nccl, auto, or a device map such as "
       "cpu:gloo,cuda:nccl. auto picks nccl for CUDA buffers when a GPU and "
       "the plugin are present, gloo otherwise. Any other name loads that "
       "backend plugin (libsyncline-backend-<name>.so), such as mpi."},
      {"SYNCLINE_UCX_OPTIONS", "",
       "Options of the ucx backend, key=value;...: the switch points "
       "(allreduce_small_max, broadcast_small_max, reduce_small_max, "
       "allgather_small_max, reduce_scatter_small_max), chunk_bytes, "
       "busy_poll_us, async_progress_delay_us, peer_error_mode, tag_spaces "
       "(backends/ucx/README.md). Any backend reads SYNCLINE_<NAME>_OPTIONS; "
       "a key here overrides the same key in CommunicatorOptions::backend_options."},
      {"SYNCLINE_NCCL_OPTIONS", "",
       "Options of the nccl backend, key=value;...: watchdog_ms, abort_poll_ms."},
      {"SYNCLINE_PLUGINS", "",
       "Interposers stacked on the backend, outermost first, e.g. trace,check."},
      {"SYNCLINE_PLUGIN_PATH", "",
       "Colon-separated folders searched first for plugins; then the folder of "
       "libsyncline, then the install folder."},
      {"SYNCLINE_TIMEOUT", "300",
       "Default deadline of every op and of init, in seconds."},
      {"SYNCLINE_RANK", "", "This process's rank (overrides RANK, Slurm, MPI)."},
      {"SYNCLINE_WORLD_SIZE", "", "Number of ranks (overrides WORLD_SIZE...)."},
      {"SYNCLINE_LOCAL_RANK", "", "Rank within this host."},
      {"SYNCLINE_LOCAL_WORLD_SIZE", "", "Number of ranks on this host."},
      {"SYNCLINE_MASTER_ADDR", "",
       "Address of the store (overrides MASTER_ADDR); default 127.0.0.1."},
      {"SYNCLINE_MASTER_PORT", "",
       "Port of the store (overrides MASTER_PORT); default 29500."},
      {"SYNCLINE_JOB_ID", "",
       "Identity of this job; ranks of another job on the same "
       "MASTER_ADDR:MASTER_PORT are refused. Falls back to "
       "TORCHELASTIC_RUN_ID, SLURM_JOB_ID.SLURM_STEP_ID or OpenMPI's job id; "
       "syncline-run generates one."},
      {"SYNCLINE_STORE_HOSTED", "0",
       "1 when a launcher (syncline-run) hosts the store; otherwise rank 0 "
       "hosts it."},
      {"SYNCLINE_STORE_PREFIX", "",
       "Key prefix for this job generation (set by syncline-run on restart)."},
      {"SYNCLINE_STORE_TOKEN", "",
       "Shared secret: when set, the store serves only clients that present "
       "it; refusals are logged with the peer address. syncline-run draws a "
       "random one per single-node job; a multi-node job must export the same "
       "value on every node."},
      {"SYNCLINE_STORE_MAX_BYTES", "1073741824",
       "Bytes of keys and values the TCP store holds in all, on the host that "
       "serves it (rank 0, or syncline-run on node 0); a write beyond it gets "
       "an error naming this variable, and nothing stored is lost. A whole "
       "number of at least 1."},
      {"SYNCLINE_NODE_CHECKED_IN", "0",
       "1 when syncline-run checked this worker's rank in, once for its whole "
       "node, before starting it; the worker then skips its own rendezvous "
       "check-in. Set by syncline-run."},
      {"SYNCLINE_RESTART_COUNT", "0",
       "How many times syncline-run restarted the workers."},
      {"SYNCLINE_SOCKET_IFNAME", "",
       "Network interface for TCP transports; accepts NCCL's ^lo,docker "
       "exclusion syntax."},
      {"SYNCLINE_LOG_LEVEL", "info",
       "trace, debug, info, warn, error or off."},
      {"SYNCLINE_LOG_RANKS", "0",
       "Ranks that print below warning level: all, 0, or a list such as 0,3."},
      {"SYNCLINE_LOG_DIR", "", "If set, each rank also logs to <dir>/rank-<r>.log."},
      {"SYNCLINE_DEBUG", "", "detail: turn on the check interposer."},
      {"SYNCLINE_FLIGHT_RECORDER_SIZE", "1024",
       "Ops kept per communicator by the always-on flight recorder."},
      {"SYNCLINE_DEBUG_DIR", "/tmp",
       "Folder for flight-recorder dumps (on an op timeout, a dead peer and SIGUSR1), created if missing; files are named syncline-flight-<job id>-rank<r>-comm<id>.json."},
      {"SYNCLINE_TEST_BACKENDS", "",
       "Tests only: extra backends (e.g. ucx,nccl) for the shared collective suite."},
      {"SYNCLINE_WARN", "",
       "Pitfall warnings to silence, by name (oversubscription, no_sync_mismatch, "
       "replica_drift, bucket_cap, verbose_logging, unknown_option, "
       "ineffective_option), or all."},
      {"SYNCLINE_CHECK_EVERY", "1000",
       "DDP: every N synced iterations (not forwards with grad mode off, not "
       "inside NoSync()), compare per-parameter checksums across ranks and name "
       "the first parameter that drifted (one small allgather; 0: off)."},
      {"SYNCLINE_CHECK_NAN", "0",
       "1: the check interposer also scans floating-point inputs for NaN/Inf "
       "before each collective and fails it on every rank, naming the rank, "
       "the op and the first bad element."},
      {"SYNCLINE_TRACE_DIR", "",
       "Folder where the trace interposer writes trace-rank<r>.json (Chrome "
       "trace / Perfetto); the current folder when unset. Merge the ranks "
       "with syncline-trace-merge."},
      {"SYNCLINE_FAULT", "",
       "Faults the faults interposer injects, ';'-separated: "
       "delay:rank=1,op=5,ms=2000, kill:rank=2,op=7, close:rank=0,op=3, "
       "fail_init:rank=1. op is the sequence number, rank may be *, and "
       "comm=ID limits a fault to one communicator; restart=N to generation N "
       "of syncline-run --max-restarts."},
  };
  return kOptions;
}

std::string EnvString(absl::string_view name) {
  for (const EnvOption& option : EnvOptions()) {
    if (name == option.name) {
      const char* value = std::getenv(option.name);
      return (value != nullptr && *value != '\0') ? std::string(value)
                                                  : std::string(option.default_value);
    }
  }
  SL_CHECK(false, absl::StrCat("undeclared option ", name).c_str());
}

absl::StatusOr<int64_t> EnvInt(absl::string_view name, int64_t min_value) {
  std::string value = EnvString(name);
  int64_t result = 0;
  if (value.empty()) return 0;
  if (!absl::SimpleAtoi(value, &result)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s=%s is not an integer; set it to a whole number or unset it",
        std::string(name), value));
  }
  if (result < min_value) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s=%s is below its minimum %d; set it to at least %d or unset it",
        std::string(name), value, min_value, min_value));
  }
  return result;
}

absl::StatusOr<absl::Duration> EnvSeconds(absl::string_view name) {
  std::string value = EnvString(name);
  double seconds = 0;
  // SimpleAtod accepts "nan" and "inf"; either would mean no deadline at all
  // (a lone rank would wait until killed), as would a value so large that
  // the duration is infinite. Every deadline here is finite.
  if (!absl::SimpleAtod(value, &seconds) || !std::isfinite(seconds) || seconds <= 0 ||
      absl::Seconds(seconds) == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s=%s is not a finite positive number of seconds; e.g. %s=60",
        std::string(name), value, std::string(name)));
  }
  return absl::Seconds(seconds);
}

std::string FormatEnvTable(bool markdown) {
  std::string out;
  if (markdown) {
    out = "| Variable | Default | Meaning |\n|---|---|---|\n";
    for (const EnvOption& o : EnvOptions()) {
      absl::StrAppend(&out, "| `", o.name, "` | ",
                      *o.default_value ? absl::StrCat("`", o.default_value, "`")
                                       : std::string("(unset)"),
                      " | ", o.doc, " |\n");
    }
    return out;
  }
  for (const EnvOption& o : EnvOptions()) {
    absl::StrAppendFormat(&out, "%-26s default: %s\n    %s\n", o.name,
                          *o.default_value ? o.default_value : "(unset)", o.doc);
  }
  return out;
}

}  // namespace syncline
