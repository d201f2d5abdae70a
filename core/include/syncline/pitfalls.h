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
//   unknown_option     | a SYNCLINE_* variable that is no option (a typo?);
//                      | names the closest known one
//   ineffective_option | an option set that does nothing as configured
//                      | (SYNCLINE_CHECK_NAN without the check interposer)
//
// Example:
//   if (syncline::PitfallEnabled(syncline::Pitfall::kBucketCap)) {
//     syncline::WarnPitfall(syncline::Pitfall::kBucketCap, rank, "...fix...");
//   }
#ifndef SYNCLINE_PITFALLS_H_
#define SYNCLINE_PITFALLS_H_

#include <string>
#include <vector>

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
  kUnknownOption,
  kIneffectiveOption,
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

// Checks of the SYNCLINE_* options in this process's environment, run by
// Communicator::Create once its interposers (`plugins`) are chosen: a
// variable that is no option is named with the closest known one, and
// SYNCLINE_CHECK_NAN=1 without the check interposer is said to do nothing.
// Variables of Syncline's own scripts and tests (SYNCLINE_TEST_*,
// SYNCLINE_BENCH_*, SYNCLINE_GPU_*, SYNCLINE_BUILD_DIR, SYNCLINE_JOBS) are
// not options and are let be.
void CheckOptionPitfalls(int rank, const std::vector<std::string>& plugins);

// The known option closest to `name` (edit distance of at most a third of
// its length, and at least 2), or "" when none is close.
std::string ClosestOption(const std::string& name);

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_PITFALLS_H_
