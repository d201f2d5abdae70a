// tcp_store.h: a Store served over TCP.
//
// TcpStoreServer runs one background thread (epoll-based) that serves many
// clients. It bounds frame, key and value sizes, rejects malformed frames and
// clients that do not open with the protocol handshake (magic + version), and
// keeps serving the others. A client that stalls or disconnects cannot block
// anyone else. Blocking waits are parked on the server by key (a write wakes
// only that key's waiters) with deadlines in a heap, not spun or scanned.
//
// Against starvation: the server raises its RLIMIT_NOFILE soft limit to the
// hard limit; listens with the kernel's largest backlog; closes connections
// that have not completed the handshake within handshake_timeout; caps
// connections per peer address (pending handshakes separately, tighter) and in
// total; and on EMFILE/ENFILE sheds the pending connections with a reserve fd
// and pauses accepting for 100 ms instead of spinning. Refusals are logged
// (at most once a second per reason) naming the peer or limit. Keys and
// values together are held to max_store_bytes; a write past it gets an error.
//
// With a token (SYNCLINE_STORE_TOKEN), only clients that present it are served.
//
// TcpStore (the client) connects with retries until its timeout, checks the
// handshake (so it notices a foreign program on the port), and sends one
// request at a time. It is thread-safe (requests are serialized). A listener
// that answers the handshake wrongly is final ("not a Syncline store"); one
// that does not answer in time is retried with jittered backoff, since an
// overloaded store looks the same until it catches up, and at the timeout the
// error names both possibilities.
//
// Example:
//   SL_ASSIGN_OR_RETURN(auto server, TcpStoreServer::Start({.host="127.0.0.1"}));
//   SL_ASSIGN_OR_RETURN(auto store, ConnectTcpStore({.host="127.0.0.1",
//                                                    .port=server->port()}));
#ifndef SYNCLINE_TCP_STORE_H_
#define SYNCLINE_TCP_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "syncline/store.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

// Protocol limits. Frames larger than these are refused and the connection
// closed; other clients are unaffected.
inline constexpr uint32_t kStoreMagic = 0x53594e43;  // "SYNC"
inline constexpr uint32_t kStoreProtocolVersion = 2;
inline constexpr size_t kStoreMaxKeyBytes = 4096;
inline constexpr size_t kStoreMaxValueBytes = 64u << 20;
inline constexpr size_t kStoreMaxKeysPerWait = 4096;
inline constexpr size_t kMaxTokenBytes = 256;

struct TcpStoreServerOptions {
  std::string host = "127.0.0.1";  // bind address (not every interface)
  int port = 0;                    // 0: pick a free port
  // Total connections served at once; beyond it new ones are accepted and
  // closed at once (logged, rate-limited). Hosts of a rendezvous derive it
  // from the world size.
  int max_connections = 4096;
  // Connections from one peer address, in all and still in the handshake.
  // The tighter pending cap stops one host's idle sockets starving others.
  int max_connections_per_peer = 8192;
  int max_pending_per_peer = 256;
  // A connection that has not completed the handshake by then is closed and
  // logged with its peer address.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // Total bytes of keys and values held. A SET, ADD or compare-set beyond it
  // gets an error reply naming the quota (the client returns it as a
  // status); nothing stored is dropped. Hosts of a job's store take it from
  // SYNCLINE_STORE_MAX_BYTES (JobStoreOptions).
  size_t max_store_bytes = size_t{1} << 30;
  // When non-empty, clients must present this token in the handshake
  // (SYNCLINE_STORE_TOKEN); others are refused and logged with their address.
  std::string token;
};

// The total connection cap for a store hosting `world_size` ranks: two per
// rank (the rank's client and one reconnecting or in a handshake) plus slack,
// and never below the default.
inline int StoreMaxConnectionsFor(int world_size) {
  int64_t n = int64_t{world_size} * 2 + 64;
  return static_cast<int>(n < 4096 ? 4096 : (n > (1 << 30) ? (1 << 30) : n));
}

// JobStoreOptions()
//
// The options of a server that hosts a job's store (rank 0's without a
// launcher, syncline-run's with one): bound to host:port, its connection cap
// sized for `world_size`, keys and values held to SYNCLINE_STORE_MAX_BYTES,
// and `token` demanded when not empty. Fails with InvalidArgument, naming the
// variable, when SYNCLINE_STORE_MAX_BYTES is not a whole number of at least 1.
//
// Example:
//   SL_ASSIGN_OR_RETURN(TcpStoreServerOptions o,
//                       JobStoreOptions("127.0.0.1", 29500, 8, token));
//   SL_ASSIGN_OR_RETURN(auto server, TcpStoreServer::Start(o));
absl::StatusOr<TcpStoreServerOptions> JobStoreOptions(const std::string& host, int port,
                                                      int world_size,
                                                      const std::string& token);

class TcpStoreServer {
 public:
  // Binds, listens and starts the serving thread. Fails with a message naming
  // host:port when the port is in use or the address is not local.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const TcpStoreServerOptions& options);
  ~TcpStoreServer();  // stops and joins the serving thread

  int port() const;
  const std::string& host() const;
  // Number of frames refused as malformed (for tests and diagnostics).
  int64_t rejected_frames() const;

  class Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct TcpStoreClientOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  // How long to keep retrying the connection and handshake.
  absl::Duration connect_timeout = absl::Seconds(60);
  // How long one attempt waits for the server's handshake reply before it
  // closes the connection and tries again (an overloaded store may not have
  // accepted it yet).
  absl::Duration handshake_timeout = absl::Seconds(10);
  std::string token;  // presented in the handshake (SYNCLINE_STORE_TOKEN)
};

// Connects to a TcpStoreServer. Retries until connect_timeout; the error names
// the address, the time waited and the last failure.
absl::StatusOr<std::shared_ptr<Store>> ConnectTcpStore(
    const TcpStoreClientOptions& options);

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_TCP_STORE_H_
