// mesh.h: Gloo's full mesh of TCP pairs, connected through the core's store.
//
// Gloo's own rendezvous (gloo::rendezvous::Context::connectFullMesh, Debian's
// gloo of 2022-05) first has every rank write its host name under "rank_<r>"
// and read those of all lower ranks (N(N-1)/2 reads in all, for a local rank
// that its tcp transport never uses), then sets one blob per rank with a
// 136-byte address for each of its N-1 peers, and every rank reads each
// peer's blob whole to take out the one entry meant for it: (N-1)^2
// addresses read per rank, O(N^3) bytes in all.
//
// ConnectMesh() makes the same pairs without it, in two steps:
//  1. the pairs to ranks (r +- 2^k) mod N, at most 2 ceil(log2 N) of them,
//     through the store: rank r sets under "gloo/p/<r>/<j>" only its pair's
//     address for j, packed (port and IP: 6 bytes for IPv4, 22 for IPv6,
//     not a 128-byte sockaddr_storage and a sequence number), and gets the
//     keys meant for it;
//  2. every other pair's address over those pairs, with Bruck's all-to-all
//     (ceil(log2 N) rounds of about N/2 blocks of 23 bytes), then those
//     pairs.
// Per rank: O(log N) store requests and bytes (14 at 16 ranks, 56 at 10k);
// O(N log N) keys in the store in all. The N-1 TCP connections per rank are
// Gloo's full mesh itself.
//
// Why not one key per rank, or lazy connection: in this Gloo every tcp Pair
// opens its own listening socket on an ephemeral port the kernel picks
// (Pair::listen() binds the device's address with port 0), and the two
// ports decide which side dials. A peer must therefore learn, for each
// pair, a port that nothing else determines: N(N-1) ports in all (here over
// the pairs of step 1, not the store). One listening socket per device,
// with pair addresses a peer can compute (sockaddr plus a sequence number),
// came to Gloo in 2023 (facebookincubator/gloo #361). Pairs cannot connect
// on first use: both ends of a Pair must call its blocking connect(),
// Gloo's algorithms pick their peers internally and send on every pair as
// if connected (transport::Context::getPair() hands out the pair as is),
// and the store is valid during comm_create only.
//
// Errors: a failing store call throws StoreError, which keeps the store's
// result code (e.g. SL_ERR_TIMEOUT) and message, so comm_create can report
// them as they are rather than as a generic Gloo exception. Gloo's own
// exceptions (a peer that does not connect) pass through.
// Thread safety: used by the thread running comm_create only.
#ifndef SYNCLINE_BACKENDS_GLOO_MESH_H_
#define SYNCLINE_BACKENDS_GLOO_MESH_H_

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gloo/context.h"
#include "gloo/transport/device.h"
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

// The largest packed pair address (IPv6: port, address, scope id).
inline constexpr size_t kMaxPackedAddressBytes = 22;

// A gloo::Context whose pairs ConnectMesh() creates and connects.
class MeshContext : public ::gloo::Context {
 public:
  MeshContext(int rank, int size) : ::gloo::Context(rank, size) {}

  // Creates a pair to every other rank on `device` and connects them all as
  // above, through `store` (valid for the call only), by `deadline` (store
  // waits and the all-to-all) and this context's timeout (a pair waiting
  // for its peer to dial).
  // Returns each peer's address as Gloo prints it, with its rank, for
  // naming peers in later errors. Throws on failure (see above).
  std::vector<std::pair<std::string, int>> ConnectMesh(
      const sl_store_t& store, std::shared_ptr<::gloo::transport::Device> device,
      std::chrono::steady_clock::time_point deadline);
};

}  // namespace syncline::gloo_backend

#endif  // SYNCLINE_BACKENDS_GLOO_MESH_H_
