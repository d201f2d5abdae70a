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
#include "tcp_store_session.h"

namespace syncline {

namespace proto = store_protocol;

namespace {

constexpr size_t kMaxPendingOutput = 256u << 20;

struct Conn {
  int fd = -1;
  std::string peer;
  proto::Session session;
  std::string out;
};

struct Waiter {
  int fd;
  proto::ParkedRequest request;
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
       int max_connections, std::string token)
      : listen_fd_(listen_fd), wake_read_(wake_read), wake_write_(wake_write),
        host_(std::move(host)), port_(port), max_connections_(max_connections),
        token_(std::move(token)) {
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
        if (!ok) Close(fds[i].fd);
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
    Conn& conn = conns_.try_emplace(fd, Conn{fd, PeerName(addr), proto::Session(token_), ""})
                     .first->second;
    (void)conn;
  }

  // Returns false when the connection must be closed now.
  bool ReadFrom(Conn& conn) {
    char buf[65536];
    size_t taken = 0;
    while (true) {
      ssize_t n = ::recv(conn.fd, buf, sizeof(buf), 0);
      if (n == 0) return false;
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return false;
      }
      std::vector<proto::ParkedRequest> parked;
      bool mutated = false;
      bool ok = conn.session.Feed({buf, static_cast<size_t>(n)}, data_, &conn.out, &parked,
                                  &mutated);
      for (auto& p : parked) {
        absl::Time deadline = absl::Now() + absl::Milliseconds(std::max<int64_t>(p.timeout_ms, 0));
        waiters_.push_back({conn.fd, std::move(p), deadline});
      }
      if (mutated || !parked.empty()) WakeWaiters();
      if (!ok) {
        ++rejected_;
        SL_LOG(WARN, "store: refused %s from %s; closing that connection",
               conn.session.error(), conn.peer);
        Flush(conn);  // best effort: e.g. the token refusal
        return false;
      }
      // Fairness: serve others before reading more from a fast sender.
      taken += n;
      if (taken > (4u << 20)) break;
    }
    return Flush(conn);
  }

  // Answers every waiter whose keys all exist.
  void WakeWaiters() {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      bool ready = true;
      for (const auto& k : it->request.keys) ready = ready && data_.count(k) > 0;
      auto conn = conns_.find(it->fd);
      if (ready && conn != conns_.end()) {
        conn->second.out += proto::Session::Answer(it->request, data_);
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
        conn->second.out += proto::Session::TimedOut(it->request, data_);
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
  const std::string token_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> rejected_{0};
  // Owned by the serving thread only.
  std::map<int, Conn> conns_;
  std::list<Waiter> waiters_;
  proto::KeyValueMap data_;
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
                                     port, options.max_connections, options.token);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStoreServer::~TcpStoreServer() = default;
int TcpStoreServer::port() const { return impl_->port(); }
const std::string& TcpStoreServer::host() const { return impl_->host(); }
int64_t TcpStoreServer::rejected_frames() const { return impl_->rejected(); }

}  // namespace syncline
