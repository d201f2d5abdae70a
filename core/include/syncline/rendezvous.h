// rendezvous.h: who am I, how many are we, and where do we meet.
//
// Rank and world size come from, in order: explicit options, SYNCLINE_RANK /
// SYNCLINE_WORLD_SIZE, the torchrun names (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Slurm (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, first host of SLURM_STEP_NODELIST), and OpenMPI
// (OMPI_COMM_WORLD_*). With none set the process is rank 0 of 1.
//
// Bad input is rejected before any transport starts: a non-numeric or
// negative rank, rank >= world size, a malformed port.
//
// Example:
//   SL_ASSIGN_OR_RETURN(RendezvousInfo info, ResolveRendezvous({}));
//   SL_ASSIGN_OR_RETURN(auto store, ConnectRendezvousStore(info, timeout));
#ifndef SYNCLINE_RENDEZVOUS_H_
#define SYNCLINE_RENDEZVOUS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "syncline/store.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

struct RendezvousInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source;       // "explicit", "syncline", "torchrun", "slurm", ...
  bool store_hosted = false;  // a launcher already hosts the store
  std::string store_prefix;   // generation prefix set by the launcher
  // Which job this process belongs to (see ResolveJobId); "" when nothing in
  // the environment names one.
  std::string job_id;
  std::string job_id_source;  // the variable(s) it came from
  // How many ranks this check-in covers: [rank, rank + check_in_ranks). A
  // node leader (the launcher on a node) checks in once for the ranks it
  // started, so that the store sees nodes, not ranks; those ranks must
  // then not check in themselves (their rank keys are taken). 1: this rank.
  int check_in_ranks = 1;
  // This rank was checked in by its node's launcher before it started
  // (SYNCLINE_NODE_CHECKED_IN=1, with store_hosted): ConnectRendezvousStore
  // then only connects, since the job has met already.
  bool node_checked_in = false;
};

// Reads a variable; tests pass their own lookup instead of getenv.
using EnvLookup = std::function<const char*(const char*)>;

// JobIdentity / ResolveJobId()
//
// The identity of the job this process belongs to, from, in order:
// SYNCLINE_JOB_ID, torchrun's TORCHELASTIC_RUN_ID, Slurm's SLURM_JOB_ID plus
// SLURM_STEP_ID ("1234.0"), OpenMPI's OMPI_MCA_ess_base_jobid. `syncline-run`
// sets SYNCLINE_JOB_ID for its workers. With none of these set, `id` is "" and
// two bare jobs on one MASTER_ADDR:MASTER_PORT cannot be told apart.
struct JobIdentity {
  std::string id;
  std::string source;  // the variable it came from, e.g. "TORCHELASTIC_RUN_ID"
};
JobIdentity ResolveJobId(const EnvLookup& env = {});

// ResolveRendezvous()
//
// `rank`/`world_size` >= 0 override the environment.
absl::StatusOr<RendezvousInfo> ResolveRendezvous(int rank, int world_size,
                                                 const EnvLookup& env = {});

// ConnectRendezvousStore()
//
// World size 1: an in-memory store. Otherwise rank 0 hosts a TcpStoreServer on
// master_addr:master_port unless a launcher already does, and every rank
// connects to it. Then every rank checks in (RendezvousCheckIn); the call
// returns once all `world_size` ranks have, or fails after `timeout`. A rank
// whose launcher checked its node in already (info.node_checked_in) only
// connects. Blocking; call it once per rank and job.
absl::StatusOr<std::shared_ptr<Store>> ConnectRendezvousStore(
    const RendezvousInfo& info, absl::Duration timeout);

// RendezvousCheckIn()
//
// The check-in alone, on a store the caller already holds (for launchers and
// tests; ConnectRendezvousStore() calls it). Costs about five store requests
// per rank whatever the world size, and blocks until every rank has checked
// in or `timeout` passes. With info.check_in_ranks = k (a node leader), one
// call checks in k ranks at 4 + k requests: one connection and one waiter
// per node instead of k. Errors:
//   FailedPrecondition  this process belongs to another job (another job id,
//                       or another world size than rank 0's): two jobs share
//                       the address. The job it tried to join is not harmed;
//                       its rank 0 logs a warning naming this process.
//   AlreadyExists       another process holds this rank (named by host and
//                       pid); the same holds for the job.
//   DeadlineExceeded    on every rank alike: who checked in and who is
//                       missing, as ranges ("ranks 5-1023, 1019 in all"), and
//                       any process refused meanwhile.
//   Unavailable         the store was lost (its host exited).
//
// Example:
//   SL_RETURN_IF_ERROR(RendezvousCheckIn(*store, info, absl::Seconds(300)));
absl::Status RendezvousCheckIn(Store& store, const RendezvousInfo& info,
                               absl::Duration timeout);

// AbandonRendezvousCheckIn()
//
// Ends the check-in on `store` for everyone: unless a verdict stands already,
// `reason` (not OK) becomes the job's verdict, and every rank waiting in
// RendezvousCheckIn() returns it at once. For a launcher that learns, while
// its node's check-in waits, that the job cannot meet (it was interrupted, or
// another node failed). Returns an error only when the store is unreachable.
//
// Example:
//   (void)AbandonRendezvousCheckIn(*store, absl::AbortedError("node 3 failed"));
absl::Status AbandonRendezvousCheckIn(Store& store, const absl::Status& reason);

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_RENDEZVOUS_H_
