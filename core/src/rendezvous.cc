// rendezvous.cc: rank discovery from the environment, and the store every
// rank meets on (the check-in itself is rendezvous_check_in.cc).
#include "syncline/rendezvous.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rendezvous_check_in.h"
#include "syncline/env.h"
#include "syncline/status.h"
#include "syncline/tcp_store.h"

namespace syncline {
namespace {

// The variables that name rank, size, local rank and local size, per source.
struct EnvSource {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};
constexpr EnvSource kSources[] = {
    {"syncline", "SYNCLINE_RANK", "SYNCLINE_WORLD_SIZE", "SYNCLINE_LOCAL_RANK",
     "SYNCLINE_LOCAL_WORLD_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
     "SLURM_NTASKS_PER_NODE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
};

absl::StatusOr<int> ParseNonNegative(const EnvLookup& env, const char* name,
                                     const char* what) {
  const char* value = env(name);
  int result = -1;
  if (!absl::SimpleAtoi(value, &result) || result < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s='%s' is not a valid %s: expected a whole number >= 0", name, value,
        what));
  }
  return result;
}

// First host of a Slurm node list: "gpu[03-05,9],cpu1" -> "gpu03".
std::string FirstSlurmHost(const std::string& list) {
  size_t end = list.find_first_of("[,");
  std::string host = list.substr(0, end);
  if (end != std::string::npos && list[end] == '[') {
    size_t stop = list.find_first_of("-,]", end + 1);
    host += list.substr(end + 1, stop - end - 1);
  }
  return host;
}

// Keeps a hosted server alive as long as the store handed out.
class HostingStore final : public Store {
 public:
  HostingStore(std::unique_ptr<TcpStoreServer> server, std::shared_ptr<Store> client)
      : server_(std::move(server)), client_(std::move(client)) {}
  absl::Status Set(absl::string_view k, absl::string_view v) override { return client_->Set(k, v); }
  absl::StatusOr<std::string> Get(absl::string_view k, absl::Duration t) override { return client_->Get(k, t); }
  absl::StatusOr<int64_t> Add(absl::string_view k, int64_t d) override { return client_->Add(k, d); }
  absl::Status Wait(absl::Span<const std::string> k, absl::Duration t) override { return client_->Wait(k, t); }
  absl::StatusOr<std::string> CompareSet(absl::string_view k, absl::string_view e,
                                         absl::string_view d) override {
    return client_->CompareSet(k, e, d);
  }
  absl::StatusOr<bool> Delete(absl::string_view k) override { return client_->Delete(k); }
  absl::StatusOr<int64_t> NumKeys() override { return client_->NumKeys(); }
  absl::StatusOr<std::vector<bool>> Check(absl::Span<const std::string> k) override {
    return client_->Check(k);
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // destroyed after the client
  std::shared_ptr<Store> client_;
};

}  // namespace

JobIdentity ResolveJobId(const EnvLookup& lookup) {
  EnvLookup env = lookup ? lookup : [](const char* n) { return std::getenv(n); };
  auto value = [&](const char* n) -> std::string {
    const char* v = env(n);
    return v ? std::string(v) : std::string();
  };
  for (const char* name : {"SYNCLINE_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    // torchrun's default run id is the literal "none": not an identity.
    std::string v = value(name);
    if (!v.empty() && v != "none") return {v, name};
  }
  if (std::string job = value("SLURM_JOB_ID"); !job.empty()) {
    std::string step = value("SLURM_STEP_ID");
    return {step.empty() ? job : absl::StrCat(job, ".", step),
            step.empty() ? "SLURM_JOB_ID" : "SLURM_JOB_ID.SLURM_STEP_ID"};
  }
  if (std::string v = value("OMPI_MCA_ess_base_jobid"); !v.empty()) {
    return {v, "OMPI_MCA_ess_base_jobid"};
  }
  return {};
}

absl::StatusOr<RendezvousInfo> ResolveRendezvous(int rank, int world_size,
                                                 const EnvLookup& lookup) {
  EnvLookup env = lookup ? lookup : [](const char* n) { return std::getenv(n); };
  auto has = [&](const char* n) { return n && env(n) && *env(n); };
  RendezvousInfo info;
  info.source = "default";
  for (const EnvSource& src : kSources) {
    if (!has(src.rank) && !has(src.size)) continue;
    if (!has(src.rank) || !has(src.size)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s is set but %s is not; set both (or neither)",
          has(src.rank) ? src.rank : src.size, has(src.rank) ? src.size : src.rank));
    }
    SL_ASSIGN_OR_RETURN(info.rank, ParseNonNegative(env, src.rank, "rank"));
    SL_ASSIGN_OR_RETURN(info.world_size, ParseNonNegative(env, src.size, "world size"));
    if (has(src.local_rank)) {
      SL_ASSIGN_OR_RETURN(info.local_rank, ParseNonNegative(env, src.local_rank, "local rank"));
    }
    if (has(src.local_size)) {
      int ls = 0;
      // Slurm's tasks-per-node may read "2(x3)": keep the leading number.
      if (absl::SimpleAtoi(std::string(env(src.local_size)).substr(
                               0, std::string(env(src.local_size)).find('(')),
                           &ls) && ls > 0) {
        info.local_world_size = ls;
      }
    } else {
      info.local_world_size = info.world_size;
    }
    info.source = src.name;
    break;
  }
  if (rank >= 0 || world_size >= 0) {
    if (rank >= 0) info.rank = rank;
    if (world_size >= 0) info.world_size = world_size;
    info.source = "explicit";
  }
  if (info.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "world size %d (from %s) must be at least 1", info.world_size, info.source));
  }
  if (info.rank >= info.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d (from %s) is not below the world size %d; ranks run from 0 to %d",
        info.rank, info.source, info.world_size, info.world_size - 1));
  }
  if (has("SYNCLINE_MASTER_ADDR")) info.master_addr = env("SYNCLINE_MASTER_ADDR");
  else if (has("MASTER_ADDR")) info.master_addr = env("MASTER_ADDR");
  else if (has("SLURM_STEP_NODELIST")) info.master_addr = FirstSlurmHost(env("SLURM_STEP_NODELIST"));
  else if (has("SLURM_JOB_NODELIST")) info.master_addr = FirstSlurmHost(env("SLURM_JOB_NODELIST"));
  const char* port_var = has("SYNCLINE_MASTER_PORT") ? "SYNCLINE_MASTER_PORT"
                         : has("MASTER_PORT")        ? "MASTER_PORT"
                                                     : nullptr;
  if (port_var != nullptr) {
    int port = -1;
    if (!absl::SimpleAtoi(env(port_var), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s='%s' is not a valid port: expected a number from 1 to 65535",
          port_var, env(port_var)));
    }
    info.master_port = port;
  } else if (has("SLURM_JOB_ID")) {
    int job = 0;
    if (absl::SimpleAtoi(env("SLURM_JOB_ID"), &job)) info.master_port = 20000 + job % 10000;
  }
  info.store_hosted = has("SYNCLINE_STORE_HOSTED") &&
                      std::string(env("SYNCLINE_STORE_HOSTED")) == "1";
  if (has("SYNCLINE_STORE_PREFIX")) info.store_prefix = env("SYNCLINE_STORE_PREFIX");
  info.node_checked_in = info.store_hosted && has("SYNCLINE_NODE_CHECKED_IN") &&
                         std::string(env("SYNCLINE_NODE_CHECKED_IN")) == "1";
  JobIdentity job = ResolveJobId(env);
  info.job_id = job.id;
  info.job_id_source = job.source;
  return info;
}

absl::StatusOr<std::shared_ptr<Store>> ConnectRendezvousStore(
    const RendezvousInfo& info, absl::Duration timeout) {
  if (info.world_size == 1 && !info.store_hosted) return MakeHashStore();
  absl::Time deadline = absl::Now() + timeout;
  std::string where = absl::StrCat(info.master_addr, ":", info.master_port);
  std::unique_ptr<TcpStoreServer> server;
  if (info.rank == 0 && !info.store_hosted) {
    SL_ASSIGN_OR_RETURN(
        TcpStoreServerOptions options,
        JobStoreOptions(info.master_addr, info.master_port, info.world_size,
                        EnvString("SYNCLINE_STORE_TOKEN")));
    SL_ASSIGN_OR_RETURN(server, TcpStoreServer::Start(options));
  }
  SL_ASSIGN_OR_RETURN(
      std::shared_ptr<Store> client,
      ConnectTcpStore({.host = info.master_addr, .port = info.master_port,
                       .connect_timeout = timeout,
                       .token = EnvString("SYNCLINE_STORE_TOKEN")}));
  const bool server_hosted = server != nullptr;
  std::shared_ptr<Store> store =
      server ? std::make_shared<HostingStore>(std::move(server), client) : client;
  if (!info.store_prefix.empty()) store = MakePrefixStore(info.store_prefix, store);
  if (info.node_checked_in && info.store_hosted) return store;  // the launcher did
  absl::Duration left = std::max(deadline - absl::Now(), absl::Milliseconds(1));
  SL_RETURN_IF_ERROR(internal::CheckIn(*store, info, left, where, /*hosts_store=*/server_hosted));
  return store;
}

absl::Status RendezvousCheckIn(Store& store, const RendezvousInfo& info,
                               absl::Duration timeout) {
  return internal::CheckIn(store, info, timeout, "the given store", /*hosts_store=*/false);
}

absl::Status AbandonRendezvousCheckIn(Store& store, const absl::Status& reason) {
  if (reason.ok()) {
    return absl::InvalidArgumentError(
        "a check-in is abandoned for a reason, not with OK");
  }
  return internal::Abandon(store, reason);
}

}  // namespace syncline
