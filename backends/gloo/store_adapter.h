// store_adapter.h: the core's sl_store_t seen as a gloo::rendezvous::Store.
//
// Gloo's connectFullMesh() publishes each rank's pair addresses through a
// gloo Store and waits for the others'. This adapter forwards those calls to
// the store the core hands to comm_create (already scoped to the
// communicator), with one deadline for the whole bootstrap so that a rank
// that never shows up fails the join in time, not once per key.
//
// Scale: Debian's Gloo (2022-05) sets, under key "<r>", one blob with rank
// r's address for each of its N-1 peers in rank order, and every rank reads
// every other rank's blob whole to extract the one entry meant for it
// (Context::extractAddress): (N-1)^2 addresses of 136 bytes read per rank,
// O(N^3) bytes in all (30 kB per rank at 16 ranks, 143 MB at 1,024, 13.6 GB
// at 10k). The adapter stores such a blob as one key per entry
// ("gloo/pair/<r>/<i>") and answers Gloo's read of rank r's blob with a blob
// of the same size that holds only the entry Gloo extracts (the others are
// zero and never read): N-1 addresses read per rank, O(N^2) bytes in all, at
// the price of N-1 small sets instead of one. The full mesh itself (N-1
// sockets per rank) is Gloo's; this Gloo has no lazy connection mode.
// A value that wait() fetched is kept for the get() that follows it, so
// each value crosses the network once.
//
// Errors: a failing store call throws StoreError, which keeps the store's
// result code (e.g. SL_ERR_TIMEOUT) and message, so comm_create can report
// them as they are rather than as a generic Gloo exception.
// Thread safety: used by the thread running comm_create only.
#ifndef SYNCLINE_BACKENDS_GLOO_STORE_ADAPTER_H_
#define SYNCLINE_BACKENDS_GLOO_STORE_ADAPTER_H_

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"
#include "syncline/plugin_abi.h"

namespace syncline::gloo_backend {

// StoreError: a store call failed; carries the store's own result code.
class StoreError : public std::runtime_error {
 public:
  StoreError(sl_result_t code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  sl_result_t code() const { return code_; }

 private:
  sl_result_t code_;
};

class StoreAdapter : public ::gloo::rendezvous::Store {
 public:
  // `store` must outlive the adapter (it is valid during comm_create only).
  // `rank` of `size`: the ranks of the context being connected.
  StoreAdapter(const sl_store_t* store, int rank, int size,
               std::chrono::steady_clock::time_point deadline);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until `key` exists or the bootstrap deadline.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The values read under numeric keys, by rank: what connectFullMesh
  // publishes as each rank's pair addresses. Used to name peers in errors.
  const std::map<int, std::vector<char>>& rank_values() const { return rank_values_; }

 private:
  // Milliseconds left until min(deadline_, now + cap); at least 1.
  int64_t RemainingMs(std::chrono::milliseconds cap) const;
  // The C store's calls, on the adapter's own key names; `what` for errors.
  void Put(const std::string& key, const char* data, size_t len);
  std::vector<char> Fetch(const std::string& key, std::chrono::milliseconds cap,
                          const std::string& what);
  // Rank r (!= this rank) when `key` names its address blob, else -1.
  int BlobRank(const std::string& key) const;
  // The blob Gloo expects for rank `peer`, with only this rank's entry.
  std::vector<char> PeerBlob(int peer, std::chrono::milliseconds cap);

  const sl_store_t* store_;
  const int rank_;
  const int size_;
  std::chrono::steady_clock::time_point deadline_;
  std::map<int, std::vector<char>> rank_values_;
  std::map<std::string, std::vector<char>> waited_;  // fetched by wait()
};

}  // namespace syncline::gloo_backend

#endif  // SYNCLINE_BACKENDS_GLOO_STORE_ADAPTER_H_
