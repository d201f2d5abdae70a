// tcp_store.h: a Store served over TCP.
//
// TcpStoreServer runs one background thread (poll-based) that serves many
// clients. It bounds frame, key and value sizes, rejects malformed frames and
// clients that do not open with the protocol handshake (magic + version), and
// keeps serving the others. A client that stalls or disconnects cannot block
// anyone else. Blocking waits are parked on the server, not spun.
//
// With a token (SYNCLINE_STORE_TOKEN), only clients that present it are served.
//
// TcpStore (the client) connects with retries until its timeout, checks the
// handshake (so it notices a foreign program on the port), and sends one
// request at a time. It is thread-safe (requests are serialized).
//
// Example:
//   SL_ASSIGN_OR_RETURN(auto server, TcpStoreServer::Start({.host="127.0.0.1"}));
//   SL_ASSIGN_OR_RETURN(auto store, ConnectTcpStore({.host="127.0.0.1",
//                                                    .port=server->port()}));
#ifndef SYNCLINE_TCP_STORE_H_
#define SYNCLINE_TCP_STORE_H_

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
  int max_connections = 4096;
  // When non-empty, clients must present this token in the handshake
  // (SYNCLINE_STORE_TOKEN); others are refused and logged with their address.
  std::string token;
};

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
  std::string token;  // presented in the handshake (SYNCLINE_STORE_TOKEN)
};

// Connects to a TcpStoreServer. Retries until connect_timeout; the error names
// the address, the time waited and the last failure.
absl::StatusOr<std::shared_ptr<Store>> ConnectTcpStore(
    const TcpStoreClientOptions& options);

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_TCP_STORE_H_
