// rank_verdict.h: one outcome that every rank of a group reads.
//
// The rendezvous check-in and the backend agreement end the same way: ranks
// arrive one by one, then every rank must return the same result (success,
// or the same error message) before any of them goes on. At cluster scale
// nothing may poll or scan per rank, so each step below is a constant number
// of store requests whatever the world size:
//
//   Arrive()          one Add on the arrival counter. The caller whose Add
//                     returns the world size is the last one, and publishes.
//   Publish()         one CompareSet: the first verdict stands and later ones
//                     are ignored; returns the one that stands. The publisher
//                     whose verdict stands also posts a "verdict:" event.
//   Post(), Event()   an append-only list of events (one Add and one Set to
//                     post, one blocking Get to read the next), for a rank
//                     that must hear of more than the verdict while it waits:
//                     rank 0 of the rendezvous warns about refused processes.
//   AwaitOrTimeOut()  one Get that blocks on the server until a verdict
//                     stands. Past the deadline one rank (whoever claims the
//                     scan) builds the timeout verdict, which may scan the
//                     ranks' keys once, in chunks (MissingRanks), and
//                     publishes it for everyone.
//   Acknowledge()     after an error verdict: counts this rank as a reader.
//   WaitForReaders()  in the process that hosts the TcpStore server, before it
//                     returns the error (and its caller exits, taking the
//                     store along): waits, bounded, until every rank that
//                     arrived has read the verdict, so that none of them is
//                     left with "the store closed the connection".
//
// A verdict travels as a serialized absl::Status ("<code>:<message>").
// Keys, under `scope`: arrived, verdict, scanner, read, all_read, events,
// event/<k>.
//
// Thread safety: one RankVerdict per rank and per agreement; the store may be
// shared.
#ifndef SYNCLINE_CORE_SRC_RANK_VERDICT_H_
#define SYNCLINE_CORE_SRC_RANK_VERDICT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "syncline/store.h"

namespace syncline::internal {

// The event Publish() posts when its verdict stands.
inline constexpr absl::string_view kVerdictEvent = "verdict:";

// How long the store's host waits for the others to read an error verdict.
inline constexpr absl::Duration kVerdictReadersBound = absl::Seconds(10);
// Most keys one Check() asks about when naming who is missing.
inline constexpr int kScanChunk = 1024;

class RankVerdict {
 public:
  RankVerdict(Store& store, std::string scope)
      : store_(store), scope_(std::move(scope)) {}

  // Counts `ranks` ranks in (1, or a node leader's ranks); returns how many
  // have arrived, these included.
  absl::StatusOr<int64_t> Arrive(int64_t ranks = 1);

  // Publishes `verdict` unless one already stands; returns the one that does.
  absl::StatusOr<absl::Status> Publish(const absl::Status& verdict);

  // Appends `event` (see the file comment); returns its number, from 1.
  absl::StatusOr<int64_t> Post(absl::string_view event);

  // Event number `k`, waiting for it until `deadline` (DeadlineExceeded).
  absl::StatusOr<std::string> Event(int64_t k, absl::Time deadline);

  // Up to `limit` events that are not "verdict:" ones, and how many events
  // were posted in all.
  absl::StatusOr<std::vector<std::string>> Events(int limit, int64_t* total);

  // Whether a verdict stands now (one Check).
  absl::StatusOr<bool> Decided();

  // Blocks until a verdict stands. Past `deadline`, one rank calls
  // `on_timeout` (the others wait a little for its result) and publishes
  // what it returns. The outer status is the store's (e.g. it was lost);
  // the inner one is the verdict.
  absl::StatusOr<absl::Status> AwaitOrTimeOut(
      absl::Time deadline, const std::function<absl::Status()>& on_timeout);

  // After an error verdict: these `ranks` (as counted by Arrive) have read it.
  absl::Status Acknowledge(int64_t ranks = 1);

  // The store's host: waits until every rank that arrived has acknowledged,
  // at most `bound`. Returns whether they all did.
  bool WaitForReaders(absl::Duration bound);

  std::string Key(absl::string_view name) const;

 private:
  Store& store_;
  const std::string scope_;
};

// MissingRanks()
//
// The ranks r in [0, size) for which `key(r)` does not exist, asked with
// Check() in chunks of at most kScanChunk keys (ceil(size/1024) requests).
absl::StatusOr<std::vector<int>> MissingRanks(Store& store, int size,
                                              const std::function<std::string(int)>& key);

// "<code>:<message>" and back; an unreadable string is an Internal error.
std::string EncodeVerdict(const absl::Status& status);
absl::Status DecodeVerdict(absl::string_view text);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_RANK_VERDICT_H_
