// tcp_store_client.cc: the TcpStore client.
//
// One blocking socket, one request at a time (a mutex serializes threads).
// Every read and write has a deadline, so a dead or silent server becomes an
// error, not a hang. The handshake tells a Syncline store apart from a
// foreign program that happens to listen on the port: a wrong answer is
// final, but no answer is retried until the connect timeout, since an
// overloaded store (out of descriptors, shedding, or just behind on its
// accept queue) looks the same as a silent stranger until it catches up.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "store_util.h"
#include "syncline/tcp_store.h"
#include "tcp_store_protocol.h"

namespace syncline {

namespace proto = store_protocol;

namespace {

// Extra time a blocking request waits beyond its own timeout for the reply.
constexpr absl::Duration kReplySlack = absl::Seconds(10);
constexpr absl::Duration kDefaultIoTimeout = absl::Seconds(60);

class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() { if (fd_ >= 0) ::close(fd_); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

absl::Status WaitFd(int fd, short events, absl::Time deadline, const char* what) {
  while (true) {
    int ms = static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms);
    if (n > 0) return absl::OkStatus();
    if (n == 0) return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
    if (errno != EINTR) return absl::UnavailableError(std::strerror(errno));
  }
}

absl::Status WriteAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    SL_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, "sending to the store"));
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("send failed: ", std::strerror(errno)));
    }
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, char* out, size_t len, absl::Time deadline) {
  while (len > 0) {
    SL_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, "waiting for the store's reply"));
    ssize_t n = ::recv(fd, out, len, 0);
    if (n == 0) return absl::UnavailableError("the store closed the connection");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("recv failed: ", std::strerror(errno)));
    }
    out += n;
    len -= n;
  }
  return absl::OkStatus();
}

// How a connection attempt that did not connect ended.
enum class AttemptEnd {
  kRetry,   // nobody listens yet, or the connection was closed or reset
  kSilent,  // accepted, but no handshake reply in time: an overloaded store
            // or a foreign program; retried, and the final error says both
  kFinal,   // a foreign program answered, or the store refused the token
};

// One connection attempt: connect, then handshake; `end` says whether to
// try again when it fails.
absl::StatusOr<Socket> ConnectOnce(const TcpStoreClientOptions& o, absl::Time deadline,
                                   AttemptEnd* end) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(o.host.c_str(), absl::StrCat(o.port).c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve '", o.host,
                                                   "': ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError("no address");
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (s.fd() < 0) continue;
    if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = absl::UnavailableError(std::strerror(errno));
      continue;
    }
    absl::Status st = WaitFd(s.fd(), POLLOUT, deadline, "connecting");
    int err = 0;
    socklen_t len = sizeof(err);
    if (st.ok()) ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (!st.ok() || err != 0) {
      last = st.ok() ? absl::UnavailableError(std::strerror(err)) : st;
      continue;
    }
    int one = 1;
    ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // A foreign listener may never answer: bound the handshake.
    absl::Time hs_deadline = std::min(deadline, absl::Now() + o.handshake_timeout);
    std::string hello_out = proto::EncodeHello();
    uint32_t token_len = o.token.size();
    for (int i = 0; i < 4; ++i) hello_out.push_back(static_cast<char>((token_len >> (8 * i)) & 0xff));
    hello_out += o.token;
    absl::Status sent = WriteAll(s.fd(), hello_out, hs_deadline);
    if (!sent.ok()) {
      last = sent;
      continue;
    }
    char hello[proto::kHelloBytes + 1];
    absl::Status read = ReadAll(s.fd(), hello, proto::kHelloBytes, hs_deadline);
    uint32_t magic = 0, version = 0;
    if (read.ok() && proto::DecodeHello({hello, proto::kHelloBytes}, &magic, &version)) {
      read = ReadAll(s.fd(), hello + proto::kHelloBytes, 1, hs_deadline);
      ::freeaddrinfo(res);
      if (!read.ok() || hello[proto::kHelloBytes] != 0) {
        *end = AttemptEnd::kFinal;
        return absl::PermissionDeniedError(
            "the store refused this client's token: set the same "
            "SYNCLINE_STORE_TOKEN on every rank and on the launcher");
      }
      return s;
    }
    if (read.ok()) {
      *end = AttemptEnd::kFinal;
      last = absl::FailedPreconditionError(absl::StrFormat(
          "the program listening there is not a Syncline store (handshake magic "
          "0x%08x version %u, expected 0x%08x version %u)",
          magic, version, kStoreMagic, kStoreProtocolVersion));
    } else {
      *end = absl::IsDeadlineExceeded(read) ? AttemptEnd::kSilent : AttemptEnd::kRetry;
      last = absl::Status(read.code(),
                          absl::StrCat("the handshake failed: ", read.message()));
    }
  }
  ::freeaddrinfo(res);
  return last;
}

class TcpStore final : public Store {
 public:
  TcpStore(TcpStoreClientOptions options, Socket socket)
      : options_(std::move(options)), socket_(std::move(socket)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    SL_RETURN_IF_ERROR(CheckKey(key));
    return Call(Req(proto::Command::kSet).Bytes(key).Bytes(value), kDefaultIoTimeout)
        .status();
  }

  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    SL_RETURN_IF_ERROR(CheckKey(key));
    auto reply = Call(Req(proto::Command::kGet).Bytes(key).Int(Ms(timeout)),
                      timeout + kReplySlack);
    if (!reply.ok()) return Annotate(reply.status(), timeout);
    proto::Reader r(*reply);
    std::string value;
    if (!r.Bytes(&value, kStoreMaxValueBytes)) return Malformed();
    return value;
  }

  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    SL_RETURN_IF_ERROR(CheckKey(key));
    SL_ASSIGN_OR_RETURN(std::string reply,
                        Call(Req(proto::Command::kAdd).Bytes(key).Int(delta),
                             kDefaultIoTimeout));
    proto::Reader r(reply);
    int64_t v;
    if (!r.Int(&v)) return Malformed();
    return v;
  }

  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    if (keys.size() > kStoreMaxKeysPerWait) {
      return absl::InvalidArgumentError("too many keys in one store wait");
    }
    proto::Writer w = Req(proto::Command::kWait);
    w.U32(keys.size());
    for (const auto& k : keys) {
      SL_RETURN_IF_ERROR(CheckKey(k));
      w.Bytes(k);
    }
    w.Int(Ms(timeout));
    auto reply = Call(w, timeout + kReplySlack);
    if (!reply.ok()) {
      return Annotate(reply.status(), timeout);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    SL_RETURN_IF_ERROR(CheckKey(key));
    SL_ASSIGN_OR_RETURN(
        std::string reply,
        Call(Req(proto::Command::kCompareSet).Bytes(key).Bytes(expected).Bytes(desired),
             kDefaultIoTimeout));
    proto::Reader r(reply);
    std::string v;
    if (!r.Bytes(&v, kStoreMaxValueBytes)) return Malformed();
    return v;
  }

  absl::StatusOr<bool> Delete(absl::string_view key) override {
    SL_RETURN_IF_ERROR(CheckKey(key));
    SL_ASSIGN_OR_RETURN(std::string reply,
                        Call(Req(proto::Command::kDelete).Bytes(key), kDefaultIoTimeout));
    proto::Reader r(reply);
    int64_t v;
    if (!r.Int(&v)) return Malformed();
    return v != 0;
  }

  absl::StatusOr<int64_t> NumKeys() override {
    SL_ASSIGN_OR_RETURN(std::string reply,
                        Call(Req(proto::Command::kNumKeys), kDefaultIoTimeout));
    proto::Reader r(reply);
    int64_t v;
    if (!r.Int(&v)) return Malformed();
    return v;
  }

  absl::StatusOr<std::vector<bool>> Check(
      absl::Span<const std::string> keys) override {
    proto::Writer w = Req(proto::Command::kCheck);
    w.U32(keys.size());
    for (const auto& k : keys) {
      SL_RETURN_IF_ERROR(CheckKey(k));
      w.Bytes(k);
    }
    SL_ASSIGN_OR_RETURN(std::string reply, Call(w, kDefaultIoTimeout));
    proto::Reader r(reply);
    uint32_t n;
    if (!r.U32(&n) || n != keys.size()) return Malformed();
    std::vector<bool> out(n);
    for (uint32_t i = 0; i < n; ++i) {
      int64_t v;
      if (!r.Int(&v)) return Malformed();
      out[i] = v != 0;
    }
    return out;
  }

 private:
  static proto::Writer Req(proto::Command c) {
    return proto::Writer(static_cast<uint8_t>(c));
  }
  static int64_t Ms(absl::Duration d) {
    return d == absl::InfiniteDuration() ? (int64_t{1} << 40) : absl::ToInt64Milliseconds(d);
  }
  static absl::Status CheckKey(absl::string_view key) {
    if (key.size() > kStoreMaxKeyBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "store key of ", key.size(), " bytes exceeds the limit of ",
          kStoreMaxKeyBytes));
    }
    return absl::OkStatus();
  }
  absl::Status Malformed() const {
    return absl::DataLossError(absl::StrCat("malformed reply from the store at ",
                                            options_.host, ":", options_.port));
  }
  // A "missing:" reply names the keys the store lacks, with the deadline.
  absl::Status Annotate(const absl::Status& s, absl::Duration timeout) const {
    if (s.message().rfind("missing:", 0) == 0) {
      std::vector<std::string> missing =
          absl::StrSplit(s.message().substr(8), '\n', absl::SkipEmpty());
      return internal_store::MissingKeysError(
          absl::StrCat("the store at ", options_.host, ":", options_.port), missing,
          timeout);
    }
    return s;
  }

  // Sends one request and returns the body of the reply after its code.
  absl::StatusOr<std::string> Call(const proto::Writer& request,
                                   absl::Duration timeout) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) {
      return absl::UnavailableError(absl::StrCat(
          "connection to the store at ", options_.host, ":", options_.port,
          " was lost earlier; the store's host (syncline-run or rank 0) has "
          "probably exited"));
    }
    absl::Time deadline = absl::Now() + timeout;
    absl::Status st = WriteAll(socket_.fd(), request.Frame(), deadline);
    char header[4];
    if (st.ok()) st = ReadAll(socket_.fd(), header, 4, deadline);
    std::string body;
    if (st.ok()) {
      uint32_t len = proto::LoadU32(header);
      if (len == 0 || len > proto::MaxFrameBytes()) {
        st = absl::DataLossError("oversized reply");
      } else {
        body.resize(len);
        st = ReadAll(socket_.fd(), body.data(), len, deadline);
      }
    }
    if (!st.ok()) {
      broken_ = true;  // the stream position is unknown now
      return absl::Status(st.code(), absl::StrCat("store at ", options_.host, ":",
                                                  options_.port, ": ", st.message()));
    }
    auto code = static_cast<proto::Code>(body[0]);
    body.erase(0, 1);
    proto::Reader r(body);
    std::string text;
    if (code == proto::Code::kTimeout) {
      r.Bytes(&text, proto::MaxFrameBytes());
      return absl::DeadlineExceededError(absl::StrCat("missing:", text));
    }
    if (code != proto::Code::kOk) {
      r.Bytes(&text, proto::MaxFrameBytes());
      return absl::InvalidArgumentError(absl::StrCat("store refused the request: ", text));
    }
    return body;
  }

  const TcpStoreClientOptions options_;
  std::mutex mu_;
  Socket socket_;        // guarded by mu_
  bool broken_ = false;  // guarded by mu_
};

}  // namespace

absl::StatusOr<std::shared_ptr<Store>> ConnectTcpStore(
    const TcpStoreClientOptions& options) {
  if (options.port <= 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store port ", options.port, " is out of range; use 1..65535"));
  }
  absl::Time start = absl::Now();
  absl::Time deadline = start + options.connect_timeout;
  absl::Duration backoff = absl::Milliseconds(20);
  std::minstd_rand jitter(std::random_device{}());
  absl::Status last;
  AttemptEnd end = AttemptEnd::kRetry;
  int silent = 0;  // attempts accepted but never answered
  while (true) {
    end = AttemptEnd::kRetry;
    auto socket = ConnectOnce(options, deadline, &end);
    if (socket.ok()) {
      return std::shared_ptr<Store>(
          std::make_shared<TcpStore>(options, std::move(socket).value()));
    }
    last = socket.status();
    if (end == AttemptEnd::kSilent) ++silent;
    absl::Duration left = deadline - absl::Now();
    if (end == AttemptEnd::kFinal || absl::IsInvalidArgument(last) ||
        left <= absl::ZeroDuration()) {
      break;
    }
    // Half to all of the backoff, so that thousands of clients that an
    // overloaded store dropped together do not all come back together.
    absl::Duration pause =
        backoff * std::uniform_real_distribution<double>(0.5, 1.0)(jitter);
    absl::SleepFor(std::min(pause, left));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  const std::string waited =
      absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1)));
  if (end == AttemptEnd::kSilent) {
    return absl::UnavailableError(absl::StrFormat(
        "could not reach the Syncline store at %s:%d after %s: %d connection(s) there "
        "did not complete the Syncline store handshake (each waited up to %s for a "
        "reply). Either the store is "
        "overloaded (out of file descriptors or shedding connections: its log says so; "
        "raise `ulimit -n` where it runs, or give it longer with SYNCLINE_TIMEOUT), or "
        "the program listening there is not a Syncline store (then give this job "
        "another MASTER_PORT)",
        options.host, options.port, waited, silent,
        absl::FormatDuration(options.handshake_timeout)));
  }
  return absl::UnavailableError(absl::StrFormat(
      "could not reach the Syncline store at %s:%d after %s: %s. Check that "
      "rank 0 (or syncline-run) is running and that MASTER_ADDR/MASTER_PORT "
      "match on every rank",
      options.host, options.port, waited, last.message()));
}

}  // namespace syncline
