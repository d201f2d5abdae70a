// tcp_store_session.h: the server side of the store protocol for one
// connection, free of sockets so that it can be fuzzed and unit-tested.
//
// Feed() consumes bytes as they arrive, answers complete requests into an
// output buffer, and reports requests that must wait for keys (GET, WAIT).
// Every length is checked against the protocol limits before anything is
// allocated; a violation ends the session (the server closes the socket).
//
// Thread safety: none; the server's single thread owns sessions and data.
#ifndef SYNCLINE_CORE_SRC_TCP_STORE_SESSION_H_
#define SYNCLINE_CORE_SRC_TCP_STORE_SESSION_H_

#include <cstdint>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "tcp_store_protocol.h"

namespace syncline::store_protocol {

using KeyValueMap = std::map<std::string, std::string>;

// A GET or WAIT that waits for keys. The server answers it with Answer()
// when the keys exist, or with a timeout after `timeout_ms`.
struct ParkedRequest {
  Command command;
  std::vector<std::string> keys;
  int64_t timeout_ms;
};

// The bytes of keys and values held, shared by every session of a server.
struct StoreQuota {
  size_t max_bytes = SIZE_MAX;
  size_t used_bytes = 0;
};

class Session {
 public:
  // `token`: when non-empty, the client's handshake must carry it.
  // `quota`: when given, writes that would exceed it get an error reply.
  explicit Session(std::string token = "", StoreQuota* quota = nullptr)
      : token_(std::move(token)), quota_(quota) {}

  // Consumes `bytes`. Appends replies to *out and parked requests to
  // *parked; sets *mutated when the map changed (so waiters may be ready).
  // Returns false when the connection must be closed; `error()` says why.
  bool Feed(absl::string_view bytes, KeyValueMap& data, std::string* out,
            std::vector<ParkedRequest>* parked, bool* mutated);

  const std::string& error() const { return error_; }
  // The keys written since the last call (so the server wakes only their
  // waiters).
  std::vector<std::string> TakeWritten() { return std::exchange(written_, {}); }
  bool greeted() const { return greeted_; }

  // The reply to a parked request whose keys now all exist.
  static std::string Answer(const ParkedRequest& request, const KeyValueMap& data);
  // The reply to a parked request whose time ran out.
  static std::string TimedOut(const ParkedRequest& request, const KeyValueMap& data);

 private:
  bool Greet(std::string* out);
  bool Handle(absl::string_view body, KeyValueMap& data, std::string* out,
              std::vector<ParkedRequest>* parked, bool* mutated);
  // Accounts for `key` taking `value_bytes` instead of its current size;
  // false (with an error reply in *out) when that would exceed the quota.
  bool Charge(const KeyValueMap& data, const std::string& key, size_t value_bytes,
              std::string* out);
  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  const std::string token_;
  StoreQuota* const quota_;
  std::string in_;
  bool greeted_ = false;
  std::string error_;
  std::vector<std::string> written_;
};

}  // namespace syncline::store_protocol

#endif  // SYNCLINE_CORE_SRC_TCP_STORE_SESSION_H_
