// store_adapter.h: the core's sl_store_t seen as a gloo::rendezvous::Store.
//
// Gloo's connectFullMesh() publishes each rank's pair addresses through a
// gloo Store and waits for the others'. This adapter forwards those calls to
// the store the core hands to comm_create (already scoped to the
// communicator), with one deadline for the whole bootstrap so that a rank
// that never shows up fails the join in time, not once per key.
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
  StoreAdapter(const sl_store_t* store, std::chrono::steady_clock::time_point deadline);

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

  const sl_store_t* store_;
  std::chrono::steady_clock::time_point deadline_;
  std::map<int, std::vector<char>> rank_values_;
};

}  // namespace syncline::gloo_backend

#endif  // SYNCLINE_BACKENDS_GLOO_STORE_ADAPTER_H_
