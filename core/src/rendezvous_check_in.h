// rendezvous_check_in.h: the check-in that ends ConnectRendezvousStore().
//
// Every rank of a job meets on one store. The check-in makes sure that the
// processes that meet are the job's own, and that they are all there:
//
//   1. Rank 0's record (job id, world size, host, pid) says which job the
//      store serves. Other ranks read it with one blocking Get.
//   2. A process of another job, or one that claims another world size, is
//      refused: it fails at once, saying that two jobs share
//      MASTER_ADDR:MASTER_PORT and naming rank 0's host and pid. The job is
//      not harmed: rank 0 logs a warning naming the process, and any later
//      timeout message names it too.
//   3. The rank claims its key with one CompareSet. A rank number taken twice
//      refuses the later process, naming the host and pid that hold it (and,
//      as in 2, the job warns and goes on).
//   4. One Add on the arrival counter; the last arrival publishes "ok", and
//      every rank waits for that verdict with one blocking Get (see
//      rank_verdict.h). Past the timeout one rank scans the ranks' keys, in
//      chunks, and publishes a verdict naming who is missing, as ranges; every
//      rank returns that same message.
//
// So a check-in costs about five store requests per rank, whatever the world
// size. A node leader (info.check_in_ranks = k) claims its k ranks' keys in
// step 3 and arrives for all of them at once in step 4: 4 + k requests, one
// connection and one blocked Get per node. Ranks with no job id at all (none of SYNCLINE_JOB_ID,
// TORCHELASTIC_RUN_ID, Slurm's or OpenMPI's) cannot be told apart from
// another such job with the same world size: README, "Diagnosing failures".
#ifndef SYNCLINE_CORE_SRC_RENDEZVOUS_CHECK_IN_H_
#define SYNCLINE_CORE_SRC_RENDEZVOUS_CHECK_IN_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "syncline/rendezvous.h"
#include "syncline/store.h"

namespace syncline::internal {

// Checks `info.rank` in on `store`; see the file comment. `where` names the
// store in messages ("10.0.0.1:29500"). `hosts_store`: this process serves
// the store, so before returning an error it waits (bounded) until the other
// ranks have read it.
absl::Status CheckIn(Store& store, const RendezvousInfo& info, absl::Duration timeout,
                     const std::string& where, bool hosts_store);

// Publishes `reason` as the check-in's verdict unless one stands (see
// AbandonRendezvousCheckIn in rendezvous.h).
absl::Status Abandon(Store& store, const absl::Status& reason);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_RENDEZVOUS_CHECK_IN_H_
