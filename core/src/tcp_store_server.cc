// tcp_store_server.cc: the TcpStore server.
//
// One thread owns every socket and the key-value map and serves all clients
// with poll(). Sockets are non-blocking, so a client that stalls mid-frame or
// stops reading delays nobody else. A blocking GET or WAIT is parked as a
// waiter and answered when its keys arrive or its deadline passes. Frames
// beyond the protocol limits and connections without the handshake are
// refused and closed; the refusal is counted and logged with the peer.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "syncline/log.h"
#include "syncline/tcp_store.h"
#include "tcp_store_protocol.h"

namespace syncline {

namespace proto = store_protocol;

namespace {

constexpr size_t kMaxPendingOutput = 256u << 20;

struct Conn {
  int fd = -1;
  std::string peer;
  bool greeted = false;
  bool closing = false;  // close once `out` is flushed
  std::string in;
  std::string out;
};

struct Waiter {
  int fd;
  proto::Command command;  // kGet or kWait
  std::vector<std::string> keys;
  absl::Time deadline;
};

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

class TcpStoreServer::Impl {
 public:
  Impl(int listen_fd, int wake_read, int wake_write, std::string host, int port,
       int max_connections)
      : listen_fd_(listen_fd), wake_read_(wake_read), wake_write_(wake_write),
        host_(std::move(host)), port_(port), max_connections_(max_connections) {
    thread_ = std::thread([this] { Serve(); });
  }

  ~Impl() {
    stop_ = true;
    char c = 1;
    (void)!::write(wake_write_, &c, 1);
    thread_.join();
    for (auto& [fd, conn] : conns_) ::close(fd);
    ::close(listen_fd_);
    ::close(wake_read_);
    ::close(wake_write_);
  }

  int port() const { return port_; }
  const std::string& host() const { return host_; }
  int64_t rejected() const { return rejected_.load(); }

 private:
  void Serve() {
    while (!stop_) {
      std::vector<pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({wake_read_, POLLIN, 0});
      for (auto& [fd, conn] : conns_) {
        short events = POLLIN;
        if (!conn.out.empty()) events |= POLLOUT;
        fds.push_back({fd, events, 0});
      }
      int timeout_ms = 100;
      if (!waiters_.empty()) {
        absl::Time next = absl::InfiniteFuture();
        for (const Waiter& w : waiters_) next = std::min(next, w.deadline);
        timeout_ms = static_cast<int>(std::clamp<int64_t>(
            absl::ToInt64Milliseconds(next - absl::Now()) + 1, 0, 100));
      }
      int n = ::poll(fds.data(), fds.size(), timeout_ms);
      if (n < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) Accept();
      for (size_t i = 2; i < fds.size(); ++i) {
        auto it = conns_.find(fds[i].fd);
        if (it == conns_.end()) continue;
        Conn& conn = it->second;
        bool ok = true;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ok = ReadFrom(conn);
        if (ok && (fds[i].revents & POLLOUT)) ok = Flush(conn);
        if (!ok || (conn.closing && conn.out.empty())) Close(fds[i].fd);
      }
      ExpireWaiters();
    }
  }

  void Accept() {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (static_cast<int>(conns_.size()) >= max_connections_) {
      SL_LOG(WARN, "store: refusing %s: %d connections already open",
             PeerName(addr), max_connections_);
      ::close(fd);
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn& conn = conns_[fd];
    conn.fd = fd;
    conn.peer = PeerName(addr);
  }

  // Returns false when the connection must be closed now.
  bool ReadFrom(Conn& conn) {
    char buf[65536];
    while (true) {
      ssize_t n = ::recv(conn.fd, buf, sizeof(buf), 0);
      if (n == 0) return false;
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return false;
      }
      conn.in.append(buf, n);
      if (!Process(conn)) return false;
      // Fairness: serve others before reading more from a fast sender.
      if (conn.in.size() > (4u << 20)) break;
    }
    return Flush(conn);
  }

  // Consumes complete frames from conn.in. False on a protocol violation.
  bool Process(Conn& conn) {
    if (!conn.greeted) {
      if (conn.in.size() < proto::kHelloBytes) return true;
      uint32_t magic, version;
      if (!proto::DecodeHello(conn.in, &magic, &version)) {
        Reject(conn, absl::StrFormat("bad handshake (magic 0x%08x version %u)",
                                     magic, version));
        return false;
      }
      conn.in.erase(0, proto::kHelloBytes);
      conn.out += proto::EncodeHello();
      conn.greeted = true;
    }
    while (conn.in.size() >= 4) {
      uint32_t len = proto::LoadU32(conn.in.data());
      if (len == 0 || len > proto::MaxFrameBytes()) {
        Reject(conn, absl::StrCat("frame of ", len, " bytes (limit ",
                                  proto::MaxFrameBytes(), ")"));
        conn.out += proto::Writer(static_cast<uint8_t>(proto::Code::kError))
                        .Bytes("frame exceeds the store's size limit")
                        .Frame();
        Flush(conn);  // best effort: the connection is closed right after
        return false;
      }
      if (conn.in.size() < 4 + size_t{len}) return true;
      std::string body = conn.in.substr(4, len);
      conn.in.erase(0, 4 + size_t{len});
      if (!Handle(conn, body)) {
        Reject(conn, "malformed request");
        return false;
      }
    }
    return true;
  }

  void Reject(Conn& conn, const std::string& why) {
    ++rejected_;
    SL_LOG(WARN, "store: refused %s from %s; closing that connection", why,
           conn.peer);
  }

  bool Handle(Conn& conn, absl::string_view body) {
    proto::Reader r(body);
    uint8_t cmd;
    if (!r.U8(&cmd)) return false;
    std::string key, a, b;
    int64_t num = 0;
    auto reply = [&](proto::Writer w) { conn.out += w.Frame(); };
    auto ok = [] { return proto::Writer(static_cast<uint8_t>(proto::Code::kOk)); };
    switch (static_cast<proto::Command>(cmd)) {
      case proto::Command::kSet:
        if (!r.Bytes(&key, kStoreMaxKeyBytes) || !r.Bytes(&a, kStoreMaxValueBytes)) return false;
        data_[key] = a;
        reply(ok());
        WakeWaiters();
        return true;
      case proto::Command::kGet:
        if (!r.Bytes(&key, kStoreMaxKeyBytes) || !r.Int(&num)) return false;
        Park(conn, proto::Command::kGet, {key}, num);
        return true;
      case proto::Command::kAdd: {
        if (!r.Bytes(&key, kStoreMaxKeyBytes) || !r.Int(&num)) return false;
        int64_t value = 0;
        auto it = data_.find(key);
        if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
          reply(proto::Writer(static_cast<uint8_t>(proto::Code::kError))
                    .Bytes(absl::StrCat("key '", key, "' is not an integer")));
          return true;
        }
        value += num;
        data_[key] = absl::StrCat(value);
        reply(ok().Int(value));
        WakeWaiters();
        return true;
      }
      case proto::Command::kWait: {
        uint32_t n;
        if (!r.U32(&n) || n > kStoreMaxKeysPerWait) return false;
        std::vector<std::string> keys(n);
        for (auto& k : keys) if (!r.Bytes(&k, kStoreMaxKeyBytes)) return false;
        if (!r.Int(&num)) return false;
        Park(conn, proto::Command::kWait, std::move(keys), num);
        return true;
      }
      case proto::Command::kCompareSet: {
        if (!r.Bytes(&key, kStoreMaxKeyBytes) || !r.Bytes(&a, kStoreMaxValueBytes) ||
            !r.Bytes(&b, kStoreMaxValueBytes)) return false;
        auto it = data_.find(key);
        if ((it == data_.end() && a.empty()) || (it != data_.end() && it->second == a)) {
          data_[key] = b;
          reply(ok().Bytes(b));
          WakeWaiters();
        } else {
          reply(ok().Bytes(it == data_.end() ? std::string() : it->second));
        }
        return true;
      }
      case proto::Command::kDelete:
        if (!r.Bytes(&key, kStoreMaxKeyBytes)) return false;
        reply(ok().Int(data_.erase(key) > 0 ? 1 : 0));
        return true;
      case proto::Command::kNumKeys:
        reply(ok().Int(static_cast<int64_t>(data_.size())));
        return true;
      case proto::Command::kCheck: {
        uint32_t n;
        if (!r.U32(&n) || n > kStoreMaxKeysPerWait) return false;
        proto::Writer w = ok();
        w.U32(n);
        for (uint32_t i = 0; i < n; ++i) {
          if (!r.Bytes(&key, kStoreMaxKeyBytes)) return false;
          w.Int(data_.count(key) ? 1 : 0);
        }
        reply(w);
        return true;
      }
    }
    return false;
  }

  void Park(Conn& conn, proto::Command command, std::vector<std::string> keys,
            int64_t timeout_ms) {
    waiters_.push_back({conn.fd, command, std::move(keys),
                        absl::Now() + absl::Milliseconds(std::max<int64_t>(timeout_ms, 0))});
    WakeWaiters();
  }

  // Answers every waiter whose keys all exist.
  void WakeWaiters() {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      bool ready = true;
      for (const auto& k : it->keys) ready = ready && data_.count(k) > 0;
      auto conn = conns_.find(it->fd);
      if (ready && conn != conns_.end()) {
        proto::Writer w(static_cast<uint8_t>(proto::Code::kOk));
        if (it->command == proto::Command::kGet) w.Bytes(data_[it->keys[0]]);
        conn->second.out += w.Frame();
        Flush(conn->second);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void ExpireWaiters() {
    absl::Time now = absl::Now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      auto conn = conns_.find(it->fd);
      if (it->deadline <= now && conn != conns_.end()) {
        std::vector<std::string> missing;
        for (const auto& k : it->keys) if (!data_.count(k)) missing.push_back(k);
        conn->second.out +=
            proto::Writer(static_cast<uint8_t>(proto::Code::kTimeout))
                .Bytes(absl::StrJoin(missing, "\n"))
                .Frame();
        Flush(conn->second);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  bool Flush(Conn& conn) {
    while (!conn.out.empty()) {
      ssize_t n = ::send(conn.fd, conn.out.data(), conn.out.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return false;
      }
      conn.out.erase(0, n);
    }
    if (conn.out.size() > kMaxPendingOutput) {
      SL_LOG(WARN, "store: %s is not reading its replies; closing it", conn.peer);
      return false;
    }
    return true;
  }

  void Close(int fd) {
    waiters_.remove_if([fd](const Waiter& w) { return w.fd == fd; });
    conns_.erase(fd);
    ::close(fd);
  }

  const int listen_fd_, wake_read_, wake_write_;
  const std::string host_;
  const int port_;
  const int max_connections_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> rejected_{0};
  // Owned by the serving thread only.
  std::map<int, Conn> conns_;
  std::list<Waiter> waiters_;
  std::map<std::string, std::string> data_;
  std::thread thread_;  // joined in the destructor
};

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions& options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_str = absl::StrCat(options.port);
  int rc = ::getaddrinfo(options.host.c_str(), port_str.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store: cannot resolve bind address '", options.host, "': ",
        gai_strerror(rc), "; set MASTER_ADDR to an address of this host"));
  }
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) break;
    last_error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "store: cannot listen on ", options.host, ":", options.port, ": ",
        last_error,
        last_error == std::strerror(EADDRINUSE)
            ? "; another program uses that port: pick another MASTER_PORT "
              "(or --master-port 0 for a free one)"
            : "; check that MASTER_ADDR is an address of this host"));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  int port = bound.ss_family == AF_INET
                 ? ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port)
                 : ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(fd);
    return absl::InternalError("store: pipe2 failed");
  }
  auto impl = std::make_unique<Impl>(fd, pipe_fds[0], pipe_fds[1], options.host,
                                     port, options.max_connections);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStoreServer::~TcpStoreServer() = default;
int TcpStoreServer::port() const { return impl_->port(); }
const std::string& TcpStoreServer::host() const { return impl_->host(); }
int64_t TcpStoreServer::rejected_frames() const { return impl_->rejected(); }

}  // namespace syncline
