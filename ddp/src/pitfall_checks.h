// pitfall_checks.h: the DDP side of the pitfall detector (syncline/pitfalls.h)
// (private to libsyncline_ddp).
//
//   bucket_cap        more than 100 buckets, or one bucket holding more than
//                     4 MiB of gradients (no overlap with backward possible)
//   oversubscription  libtorch intra-op threads x local ranks > cores
//   no_sync_mismatch  a forward and its backward disagree about NoSync()
//   replica_drift     every SYNCLINE_CHECK_EVERY synced iterations, a per-parameter
//                     checksum is compared across ranks
// Each warns once, on rank 0, with the fix.
#ifndef SYNCLINE_DDP_SRC_PITFALL_CHECKS_H_
#define SYNCLINE_DDP_SRC_PITFALL_CHECKS_H_

#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "syncline/communicator.h"
#include "syncline/ddp/distributed.h"

namespace syncline::ddp::internal {

// At construction: bucket layout and threads.
void CheckConstructionPitfalls(const Communicator& comm,
                               const std::vector<BucketInfo>& buckets);

// When a backward starts: `forward_synced` is what PrepareForward armed,
// `no_sync_now` whether a NoSyncGuard is alive now.
void CheckNoSyncMismatch(int rank, bool forward_synced, bool no_sync_now);

// The synced-iteration interval from SYNCLINE_CHECK_EVERY (0: off).
int64_t ReplicaCheckInterval();

// Collective: compares per-parameter checksums across ranks and warns on
// rank 0, naming the first parameter that differs and the ranks that differ.
// Returns whether the replicas differ.
bool CheckReplicaDrift(Communicator& comm, const std::vector<at::Tensor>& params,
                       const std::vector<std::string>& names, int64_t step,
                       absl::Duration timeout);

}  // namespace syncline::ddp::internal

#endif  // SYNCLINE_DDP_SRC_PITFALL_CHECKS_H_
