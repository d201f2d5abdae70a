// bootstrap.h: meeting the peers of a new Transport through the store.
//
// Only comm_create bootstraps (Split reuses its parent's Transport). Every
// rank publishes a PeerInfo (its UCP worker address plus enough about its
// host and process to tell whether a peer shares this machine) under
// "ucx/peer/<rank>", counts itself on its machine, and waits until every
// rank has published: a constant number of store requests per rank
// (PublishPeerInfo). Nobody reads everyone's address. A rank reads a peer's
// record only when it first talks to that peer (Transport::Prepare): the
// algorithms' patterns (ring: 2 peers; recursive doubling, Bruck, binomial
// trees and dissemination: log2 N) then cost O(log N) reads per rank, so
// O(N log N) in all, where an all-to-all exchange costs N(N-1) reads
// (at 100k ranks and ~200-byte records: 2 TB through one store).
// Alltoall talks to every peer and so connects to all of them, lazily too.
//
// Error handling mode, per endpoint (Options::peer_error_mode = auto):
//  - a peer on another host gets UCP_ERR_HANDLING_MODE_PEER, so a dead or
//    unreachable peer becomes an error on the endpoint (tcp, ib);
//  - a peer on this host gets UCP_ERR_HANDLING_MODE_NONE when UCX_TLS
//    allows shared memory, because UCX 1.13's shared-memory transports
//    (posix, sysv, self) have no peer-failure support and PEER mode would
//    silently move same-host traffic to tcp (measured: ~2-5x the latency).
//    Such peers are watched through a pidfd instead: the kernel makes it
//    readable the moment the process dies, and the driver polls it next to
//    the worker's event fd, so a SIGKILLed neighbour fails ops at once.
//
// Thread safety: functions are called by Transport::Create() and
// Transport::Prepare() (serialized by the Transport).
#ifndef SYNCLINE_BACKENDS_UCX_BOOTSTRAP_H_
#define SYNCLINE_BACKENDS_UCX_BOOTSTRAP_H_

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/ucx/options.h"
#include "syncline/plugin_abi.h"

namespace syncline::ucx_backend {

struct PeerInfo {
  int32_t pid = 0;
  std::string host;     // gethostname()
  std::string machine;  // boot id + pid namespace: equal means same kernel view
  std::string address;  // UCP worker address bytes

  std::string Serialize() const;
  static bool Parse(const std::string& bytes, PeerInfo* info);
};

// This process's identity, with `address` filled in.
PeerInfo LocalPeerInfo(const std::string& worker_address);

// PublishPeerInfo()
//
// Publishes `mine`, counts this rank on its machine and waits, until
// `deadline`, until all `size` ranks have published. Five store requests per
// rank (the last arrival makes six). `*ranks_on_host`: how many of the ranks
// share this machine. On failure returns the store's code with `*error`
// naming the ranks that never published (found by a scan, on that path only)
// and how long this rank waited.
sl_result_t PublishPeerInfo(const sl_store_t& store, int rank, int size,
                            const PeerInfo& mine,
                            std::chrono::steady_clock::time_point deadline,
                            int* ranks_on_host, std::string* error);

// FetchPeerInfo()
//
// One Get of rank `peer`'s record (published before PublishPeerInfo
// returned anywhere, so it waits only if the store is slow).
sl_result_t FetchPeerInfo(const sl_store_t& store, int peer,
                          std::chrono::steady_clock::time_point deadline, PeerInfo* info,
                          std::string* error);

// Whether UCX_TLS (unset: yes) lets UCX pick a shared-memory transport.
bool TlsAllowsSharedMemory();

// The endpoint error mode for a peer, per the rules above.
ucp_err_handling_mode_t ChooseErrorMode(PeerErrorMode mode, bool same_machine);

// ReachabilityHint()
//
// Why UCX may have no transport to `peer`, and what to change: the UCX_TLS
// and UCX_NET_DEVICES in effect, loopback-only devices in a multi-host job,
// shared memory across hosts, rc without ud, PEER mode over shared memory.
std::string ReachabilityHint(const PeerInfo& me, const PeerInfo& peer, int peer_rank,
                             ucp_err_handling_mode_t mode);

// The transports UCX chose for `ep`, from ucp_ep_print_info, e.g.
// "posix/memory cma/memory" (best effort, for logs and errors).
std::string EndpointTransports(ucp_ep_h ep);

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_BOOTSTRAP_H_
