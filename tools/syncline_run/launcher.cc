#include "launcher.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "generation.h"
#include "node_check_in.h"
#include "node_group.h"
#include "output.h"
#include "signals.h"
#include "summary.h"
#include "syncline/env.h"
#include "syncline/rendezvous.h"
#include "syncline/status.h"
#include "syncline/tcp_store.h"
#include "worker.h"
#include "worker_env.h"

namespace syncline::run {
namespace {

constexpr int kExitStoreFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCannotRun = 127;

// Used when PATH is unset, as the shell does.
constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

std::string RankRange(const LaunchOptions& o) {
  int first = o.node_rank * o.nproc_per_node;
  int last = first + o.nproc_per_node - 1;
  int world = o.nproc_per_node * o.nnodes;
  if (first == last) return absl::StrCat("rank ", first, " of ", world);
  return absl::StrCat("ranks ", first, "-", last, " of ", world);
}

// The command as one could paste it into a shell.
std::string QuoteCommand(const std::vector<std::string>& command) {
  std::vector<std::string> words;
  for (const std::string& arg : command) {
    bool plain = !arg.empty() &&
                 arg.find_first_not_of(
                     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                     "_-+=./,:@%") == std::string::npos;
    words.push_back(
        plain ? arg : absl::StrCat("'", absl::StrReplaceAll(arg, {{"'", "'\\''"}}), "'"));
  }
  return absl::StrJoin(words, " ");
}

// `bytes` random bytes from the kernel, as hex. getrandom never returns
// fewer than 256 bytes once the pool is initialised, except on EINTR.
absl::StatusOr<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("getrandom: ", strerror(errno)));
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char c : raw) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 0xf]);
  }
  return hex;
}

// The store token of the job: SYNCLINE_STORE_TOKEN, or on a single node a
// fresh random one (256 bits), so that no other process on the machine can
// join or read the job's store. A multi-node job without one is refused:
// every node must present the same secret, and only the operator can give
// it to all of them.
absl::StatusOr<std::string> ResolveStoreToken(const LaunchOptions& o) {
  const char* set = getenv("SYNCLINE_STORE_TOKEN");
  if (set != nullptr && *set != '\0') {
    if (strlen(set) > kMaxTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SYNCLINE_STORE_TOKEN is ", strlen(set), " bytes long; the store accepts at most ",
          kMaxTokenBytes));
    }
    return std::string(set);
  }
  if (o.nnodes > 1) {
    return absl::FailedPreconditionError(
        "a multi-node job (--nnodes > 1) needs SYNCLINE_STORE_TOKEN: without it, "
        "anyone who can reach the store's port could join the job or read and "
        "write its keys. Generate one secret and export the SAME value on every "
        "node before starting syncline-run there, e.g.\n"
        "  export SYNCLINE_STORE_TOKEN=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \\n')\n"
        "(under Slurm, export it once before srun; the job's tasks inherit it)");
  }
  return RandomHex(32);
}

// Names the inherited variables that the workers will not see, so that a
// user who exported SYNCLINE_RANK on purpose learns why it had no effect.
void WarnAboutOverrides() {
  std::vector<std::string> dropped;
  for (absl::string_view name : OverridingVariables()) {
    if (getenv(std::string(name).c_str()) != nullptr) dropped.emplace_back(name);
  }
  if (dropped.empty()) return;
  Say(absl::StrCat("not passing ", absl::StrJoin(dropped, ", "),
                   " to the workers: syncline-run assigns ranks and the store "
                   "address itself"));
}

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& options) : options_(options) {}
  int Run();

 private:
  // Hosts the store on node rank 0; sets port_ to the port it listens on.
  absl::Status HostStore();
  // Runs generations until success, a final failure or an interrupt.
  int RunGenerations();
  // Checks this node's ranks in for `generation` (node_check_in.h). Returns
  // -1 once the job has met, else the launcher's exit status.
  int MeetAsANode(int generation);
  // Multi-node: says goodbye and, on node 0, keeps the store up until the
  // other nodes are done. Returns `status`, or 128 + signal if interrupted.
  int LeaveGroup(int status);
  std::vector<WorkerSpec> MakeSpecs(int generation) const;
  // Sets job_id_: --job-id, the launcher's environment, or a random id
  // (node 0's, in a multi-node job).
  absl::Status ResolveJob();

  const LaunchOptions& options_;
  std::string program_path_;
  std::unique_ptr<SignalPipe> signals_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<NodeGroup> group_;             // multi-node jobs only
  absl::Duration timeout_ = absl::Seconds(300);  // SYNCLINE_TIMEOUT
  int port_ = 0;
  int omp_num_threads_ = 0;
  std::string store_token_;  // never empty once Run() has started the store
  std::string job_id_;       // never empty once the workers start
  std::string job_id_source_;
};

absl::Status Launcher::HostStore() {
  port_ = options_.master_port;
  if (options_.node_rank != 0) return absl::OkStatus();
  // The server's thread must not take our signals: it would be interrupted
  // (EINTR) and the main thread's poll would not wake up.
  ScopedBlockLauncherSignals block;
  SL_ASSIGN_OR_RETURN(
      TcpStoreServerOptions server_options,
      JobStoreOptions(options_.master_addr, options_.master_port,
                      options_.nnodes * options_.nproc_per_node, store_token_));
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start(server_options);
  if (!server.ok()) return server.status();
  server_ = std::move(server).value();
  port_ = server_->port();
  return absl::OkStatus();
}

absl::Status Launcher::ResolveJob() {
  if (!options_.job_id.empty()) {
    job_id_ = options_.job_id;
    job_id_source_ = "--job-id";
  } else if (JobIdentity env = ResolveJobId(); !env.id.empty()) {
    job_id_ = env.id;
    job_id_source_ = env.source;
  } else if (options_.node_rank == 0) {
    SL_ASSIGN_OR_RETURN(job_id_, RandomHex(16));
    job_id_source_ = "syncline-run (random)";
  }
  if (group_ == nullptr) return absl::OkStatus();
  std::string own = job_id_;
  SL_ASSIGN_OR_RETURN(job_id_, group_->ShareJobId(own, timeout_));
  if (own.empty()) job_id_source_ = "node 0's syncline-run (random)";
  return absl::OkStatus();
}

std::vector<WorkerSpec> Launcher::MakeSpecs(int generation) const {
  std::vector<std::string> base = CurrentEnvironment();
  std::vector<WorkerSpec> specs;
  for (int local = 0; local < options_.nproc_per_node; ++local) {
    WorkerEnvOptions env;
    env.local_rank = local;
    env.nproc_per_node = options_.nproc_per_node;
    env.nnodes = options_.nnodes;
    env.node_rank = options_.node_rank;
    env.master_addr = options_.master_addr;
    env.master_port = port_;
    env.restart_count = generation;
    env.omp_num_threads = omp_num_threads_;
    env.store_token = store_token_;
    env.job_id = job_id_;
    env.node_checked_in = true;  // MeetAsANode() did, before the workers start
    WorkerSpec spec;
    spec.rank = options_.node_rank * options_.nproc_per_node + local;
    spec.path = program_path_;
    spec.argv = options_.command;
    spec.env = BuildWorkerEnv(base, env);
    specs.push_back(std::move(spec));
  }
  return specs;
}

int Launcher::Run() {
  absl::StatusOr<std::string> token = ResolveStoreToken(options_);
  if (!token.ok()) {
    Say(token.status().message());
    return kExitUsage;
  }
  store_token_ = *std::move(token);
  if (absl::Status s = HostStore(); !s.ok()) {
    Say(absl::StrCat("cannot host the rendezvous store: ", s.message()));
    // A malformed SYNCLINE_STORE_MAX_BYTES is a bad option, not a failure.
    return absl::IsInvalidArgument(s) ? kExitUsage : kExitStoreFailed;
  }
  if (absl::StatusOr<absl::Duration> t = EnvSeconds("SYNCLINE_TIMEOUT"); t.ok()) {
    timeout_ = *t;
  }
  if (options_.nnodes > 1) {
    absl::StatusOr<std::unique_ptr<NodeGroup>> group = NodeGroup::Join(
        options_.master_addr, port_, store_token_, options_.node_rank, options_.nnodes,
        timeout_);
    if (!group.ok()) {
      Say(absl::StrCat("cannot reach the store of node 0: ", group.status().message()));
      return kExitStoreFailed;
    }
    group_ = std::move(group).value();
  }
  if (absl::Status s = ResolveJob(); !s.ok()) {
    Say(absl::StrCat("cannot agree on the job id with node 0: ", s.message()));
    return kExitStoreFailed;
  }
  // Only now: until workers exist, Ctrl-C may simply end the launcher (even
  // in the middle of connecting to node 0).
  absl::StatusOr<std::unique_ptr<SignalPipe>> signals = SignalPipe::Install();
  if (!signals.ok()) {
    Say(signals.status().message());
    return kExitCannotRun;
  }
  signals_ = std::move(signals).value();

  // Resolved only once in the group, so that the other nodes hear of it.
  const char* path_env = getenv("PATH");
  absl::StatusOr<std::string> program =
      ResolveProgram(options_.command[0], path_env ? path_env : kDefaultPath);
  if (!program.ok()) {
    Say(program.status().message());
    if (group_ != nullptr) {
      group_->ReportFailure(0, {options_.node_rank, kExitCannotRun,
                                std::string(program.status().message())});
    }
    return LeaveGroup(kExitCannotRun);
  }
  program_path_ = *program;

  if (getenv("OMP_NUM_THREADS") == nullptr) {
    omp_num_threads_ = DefaultOmpThreads(options_.nproc_per_node);
    Say(absl::StrCat("OMP_NUM_THREADS is not set; setting it to ", omp_num_threads_,
                     " for each worker (", UsableCores(), " usable cores / ",
                     options_.nproc_per_node,
                     " local worker(s)) to avoid oversubscribing the CPUs. Set "
                     "it yourself to tune."));
  }
  WarnAboutOverrides();
  Say(absl::StrCat("starting ", options_.nproc_per_node, " worker(s), ",
                   RankRange(options_), ": ", QuoteCommand(options_.command),
                   "; store at ", options_.master_addr, ":", port_,
                   server_ ? " (hosted here)" : "", "; job id '", job_id_, "' (",
                   job_id_source_, ")"));
  return LeaveGroup(RunGenerations());
}

int Launcher::MeetAsANode(int generation) {
  const absl::Time start = absl::Now();
  NodeCheckInConfig c;
  c.master_addr = options_.master_addr;
  c.port = port_;
  c.token = store_token_;
  c.generation = generation;
  c.node_rank = options_.node_rank;
  c.nproc_per_node = options_.nproc_per_node;
  c.nnodes = options_.nnodes;
  c.job_id = job_id_;
  c.job_id_source = job_id_source_;
  c.timeout = timeout_;
  c.signals = signals_.get();
  c.group = group_.get();
  NodeCheckInResult met = CheckInNode(c);
  if (met.status.ok()) return -1;
  if (met.interrupt != 0) {
    Say(absl::StrCat("stopped before the workers started; exiting with ",
                     128 + met.interrupt));
    return 128 + met.interrupt;
  }
  if (met.remote_failure) {
    WriteAll(STDERR_FILENO,
             FormatFailureSummary(generation, start, {},
                                  absl::StrCat("on node ", met.remote_failure->node_rank,
                                               ", ", met.remote_failure->reason)));
    return met.remote_failure->exit_status != 0 ? met.remote_failure->exit_status
                                                : kExitStoreFailed;
  }
  Say(absl::StrCat("the job did not meet, so no worker was started: ",
                   met.status.message()));
  if (group_ != nullptr) {
    group_->ReportFailure(generation, {options_.node_rank, kExitStoreFailed,
                                       absl::StrCat("its launcher's check-in failed: ",
                                                    met.status.message())});
  }
  return kExitStoreFailed;
}

int Launcher::RunGenerations() {
  for (int generation = 0;; ++generation) {
    if (int status = MeetAsANode(generation); status >= 0) return status;
    Generation::Config config;
    config.index = generation;
    config.specs = MakeSpecs(generation);
    config.grace_period = options_.grace_period;
    config.signals = signals_.get();
    config.group = group_.get();
    config.node_rank = options_.node_rank;
    absl::StatusOr<Generation::Result> result = Generation::Run(config);
    if (!result.ok()) {
      Say(result.status().message());
      if (group_ != nullptr) {
        // The other nodes' ranks would otherwise wait for ours until their
        // rendezvous times out.
        group_->ReportFailure(generation, {options_.node_rank, kExitCannotRun,
                                           std::string(result.status().message())});
      }
      return kExitCannotRun;
    }
    switch (result->ending) {
      case Generation::Ending::kSuccess:
        return 0;
      case Generation::Ending::kInterrupted:
        Say(absl::StrCat("stopped all workers; exiting with ", result->exit_status));
        return result->exit_status;
      case Generation::Ending::kFailure:
        break;
    }
    WriteAll(STDERR_FILENO, result->summary);
    if (generation < options_.max_restarts) {
      Say(absl::StrCat("restarting all ", options_.nproc_per_node, " worker(s): restart ",
                       generation + 1, " of ", options_.max_restarts));
      if (group_ != nullptr) {
        int interrupt = 0;
        absl::Status ready =
            group_->AwaitGeneration(generation + 1, timeout_, signals_.get(), &interrupt);
        if (!ready.ok()) {
          Say(absl::StrCat("cannot restart: ", ready.message()));
          return interrupt != 0 ? 128 + interrupt : result->exit_status;
        }
      }
      continue;
    }
    if (options_.max_restarts > 0) {
      Say(absl::StrCat("no restarts left (", options_.max_restarts, " used); giving up"));
    }
    Say(absl::StrCat("exiting with ", result->exit_status));
    return result->exit_status;
  }
}

int Launcher::LeaveGroup(int status) {
  if (group_ == nullptr) return status;
  group_->Leave();
  if (server_ == nullptr) return status;
  int interrupt = 0;
  absl::Status left =
      group_->AwaitOthersLeft(status == 0, timeout_, signals_.get(), &interrupt);
  if (!left.ok()) Say(left.message());
  return interrupt != 0 ? 128 + interrupt : status;
}

}  // namespace

absl::Status ValidateLaunchOptions(const LaunchOptions& o) {
  if (o.nproc_per_node < 1) {
    return absl::InvalidArgumentError("-n must be at least 1");
  }
  if (o.nnodes < 1) {
    return absl::InvalidArgumentError("--nnodes must be at least 1");
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank ", o.node_rank, " is out of range for --nnodes ",
                     o.nnodes, " (valid: 0..", o.nnodes - 1, ")"));
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master-port ", o.master_port, " is not a TCP port"));
  }
  if (o.node_rank > 0 && o.master_port == 0) {
    return absl::InvalidArgumentError(
        "--master-port is required on nodes other than --node-rank 0: use the "
        "port that node 0's syncline-run printed");
  }
  if (o.max_restarts < 0) {
    return absl::InvalidArgumentError("--max-restarts must be 0 or more");
  }
  if (o.grace_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--grace-period must be 0 or more");
  }
  if (o.command.empty() || o.command[0].empty()) {
    return absl::InvalidArgumentError(
        "no program given: syncline-run -n N [options] -- program [args...]");
  }
  return absl::OkStatus();
}

int RunLauncher(const LaunchOptions& options) {
  if (absl::Status s = ValidateLaunchOptions(options); !s.ok()) {
    Say(s.message());
    return kExitUsage;
  }
  return Launcher(options).Run();
}

}  // namespace syncline::run
