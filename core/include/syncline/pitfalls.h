// pitfalls.h: warnings about the classic traps of distributed training.
//
// Each warning is printed at most once per process, on rank 0, and says how
// to fix the problem. SYNCLINE_WARN silences warnings by name
// ("oversubscription,verbose_logging") or all of them ("all").
//
//   name               | trap
//   oversubscription   | intra-op threads x local ranks exceed the cores
//   no_sync_mismatch   | a forward and its backward disagree about no_sync
//   replica_drift      | ranks' parameters drifted apart (checked every
//                      | SYNCLINE_CHECK_EVERY synced iterations)
//   bucket_cap         | > 100 gradient buckets, or one bucket and no overlap
//   verbose_logging    | info-level logs from every rank of a large job
//   loopback_interface | a multi-host job would bind to loopback (an error
//                      | in the TCP backends; see socket_iface.h)
//
// Example:
//   if (syncline::PitfallEnabled(syncline::Pitfall::kBucketCap)) {
//     syncline::WarnPitfall(syncline::Pitfall::kBucketCap, rank, "...fix...");
//   }
#ifndef SYNCLINE_PITFALLS_H_
#define SYNCLINE_PITFALLS_H_

#include <string>

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

enum class Pitfall {
  kOversubscription,
  kNoSyncMismatch,
  kReplicaDrift,
  kBucketCap,
  kVerboseLogging,
  kLoopbackInterface,
};

// The name used in SYNCLINE_WARN and in the message, e.g. "bucket_cap".
const char* PitfallName(Pitfall pitfall);

// False when SYNCLINE_WARN silences it.
bool PitfallEnabled(Pitfall pitfall);

// Prints "[pitfall <name>] <message>" once per process when enabled and
// `rank` is 0. Returns whether it printed.
bool WarnPitfall(Pitfall pitfall, int rank, const std::string& message);

// The oversubscription check: warns when threads_per_rank * local_ranks
// exceeds the cores this process may run on. Returns whether it warned.
bool CheckThreadOversubscription(int rank, int threads_per_rank, int local_ranks);

// Checks run when a communicator is created (thread oversubscription from
// OMP_NUM_THREADS, verbose logging). Called by Communicator::Create.
void CheckStartupPitfalls(int rank, int world_size, int local_world_size);

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_PITFALLS_H_
