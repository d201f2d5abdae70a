// store.h: the key-value store used for bootstrap and coordination.
//
// Ranks meet through a Store: they publish addresses, ids and counters, and
// wait for each other's keys. Four implementations:
//   HashStore    in memory, one process (tests, world size 1)
//   FileStore    a file on a shared filesystem
//   TcpStore     a server (hosted by syncline-run or rank 0) and clients
//   PrefixStore  scopes another store's keys, for sub-groups and generations
//
// Every blocking call takes a timeout; a wait that runs out names the keys
// that are still missing.
// Thread safety: every Store method may be called from any thread.
//
// Example:
//   auto store = std::make_shared<HashStore>();
//   SL_RETURN_IF_ERROR(store->Set("addr/0", "10.0.0.1:4000"));
//   SL_ASSIGN_OR_RETURN(std::string a, store->Get("addr/0", absl::Seconds(5)));
#ifndef SYNCLINE_STORE_H_
#define SYNCLINE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

class Store {
 public:
  virtual ~Store() = default;

  // Sets `key` to `value`, replacing any previous value.
  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Returns the value of `key`, waiting up to `timeout` for it to be set.
  virtual absl::StatusOr<std::string> Get(absl::string_view key,
                                          absl::Duration timeout) = 0;

  // Adds `delta` to the integer at `key` (0 if absent); returns the new value.
  virtual absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) = 0;

  // Waits until every key exists. DeadlineExceeded names the missing keys.
  virtual absl::Status Wait(absl::Span<const std::string> keys,
                            absl::Duration timeout) = 0;

  // If `key` holds `expected` (or is absent and `expected` is empty), sets it
  // to `desired`. Returns the value after the call.
  virtual absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                                 absl::string_view expected,
                                                 absl::string_view desired) = 0;

  // Removes `key`; returns whether it existed.
  virtual absl::StatusOr<bool> Delete(absl::string_view key) = 0;

  // Number of keys in the store (all prefixes).
  virtual absl::StatusOr<int64_t> NumKeys() = 0;

  // Returns which of `keys` exist now. Never blocks on the keys.
  virtual absl::StatusOr<std::vector<bool>> Check(
      absl::Span<const std::string> keys) = 0;
};

// HashStore: in-process, for tests and single-process runs.
std::shared_ptr<Store> MakeHashStore();

// FileStore: all ranks open the same path (on a shared filesystem). The file
// is an append-only log of records guarded by flock().
absl::StatusOr<std::shared_ptr<Store>> MakeFileStore(const std::string& path);

// PrefixStore: every key is stored as "<prefix>/<key>".
std::shared_ptr<Store> MakePrefixStore(std::string prefix,
                                       std::shared_ptr<Store> base);

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_STORE_H_
