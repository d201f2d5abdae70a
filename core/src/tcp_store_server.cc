// tcp_store_server.cc: the TcpStore server.
//
// One thread owns every socket and the key-value map and serves all clients
// with epoll. Sockets are non-blocking, so a client that stalls mid-frame or
// stops reading delays nobody else. A blocking GET or WAIT is parked as a
// waiter under each of its keys and answered when they arrive or its deadline
// (kept in a min-heap) passes. Frames beyond the protocol limits and
// connections without the handshake (or that do not finish it in time) are
// refused and closed; the refusal is counted and logged with the peer.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <fstream>
#include <queue>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "syncline/env.h"
#include "syncline/log.h"
#include "syncline/tcp_store.h"
#include "tcp_store_protocol.h"
#include "tcp_store_session.h"

namespace syncline {

namespace proto = store_protocol;

namespace {

constexpr size_t kMaxPendingOutput = 256u << 20;
constexpr absl::Duration kAcceptPause = absl::Milliseconds(100);

struct Conn {
  Conn(const std::string& token, proto::StoreQuota* quota) : session(token, quota) {}
  int fd = -1;
  std::string ip;    // the peer address, for the per-peer caps
  std::string peer;  // ip:port, for messages
  proto::Session session;
  std::string out;
  bool pending = true;  // handshake not yet complete
  uint64_t serial = 0;  // tells a reused fd from the one a timer was set for
  std::unordered_set<uint64_t> waiter_ids;  // its parked requests
};

struct Waiter {
  int fd;
  uint64_t serial;
  proto::ParkedRequest request;
};

void PeerName(const sockaddr_storage& addr, std::string* ip, std::string* peer) {
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
  *ip = host;
  *peer = absl::StrCat(host, ":", port);
}

// Logs at most once a second per limiter, counting what it held back.
class RateLimitedLog {
 public:
  template <typename... Args>
  void Warn(const char* fmt, const Args&... args) {
    absl::Time now = absl::Now();
    if (now - last_ < absl::Seconds(1)) {
      ++suppressed_;
      return;
    }
    last_ = now;
    SL_LOG(WARN, fmt, args...);
    if (suppressed_ > 0) SL_LOG(WARN, "store: (%d similar messages suppressed)", suppressed_);
    suppressed_ = 0;
  }

 private:
  absl::Time last_ = absl::InfinitePast();
  int64_t suppressed_ = 0;
};

// The listen backlog: the kernel's somaxconn (it clamps larger values anyway).
int ListenBacklog() {
  std::ifstream f("/proc/sys/net/core/somaxconn");
  int v = 0;
  if (f >> v && v > 0) return v;
  return INT_MAX;
}

// Raises the soft RLIMIT_NOFILE to the hard limit, once per process.
void RaiseFdLimit() {
  static bool done = [] {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return true;
    rlim_t old = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) rl.rlim_cur = old;
    }
    SL_LOG(DEBUG, "store: open-file limit %llu (was %llu, hard limit %llu)",
           static_cast<unsigned long long>(rl.rlim_cur), static_cast<unsigned long long>(old),
           static_cast<unsigned long long>(rl.rlim_max));
    return true;
  }();
  (void)done;
}

}  // namespace

class TcpStoreServer::Impl {
 public:
  Impl(int listen_fd, int wake_read, int wake_write, std::string host, int port,
       TcpStoreServerOptions options)
      : listen_fd_(listen_fd), wake_read_(wake_read), wake_write_(wake_write),
        host_(std::move(host)), port_(port), options_(std::move(options)) {
    quota_.max_bytes = options_.max_store_bytes;
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    Watch(listen_fd_, EPOLLIN, EPOLL_CTL_ADD);
    Watch(wake_read_, EPOLLIN, EPOLL_CTL_ADD);
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
    ::close(epoll_fd_);
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
  }

  int port() const { return port_; }
  const std::string& host() const { return host_; }
  int64_t rejected() const { return rejected_.load(); }

 private:
  void Watch(int fd, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, op, fd, &ev);
  }

  void Serve() {
    std::vector<epoll_event> events(1024);
    while (!stop_) {
      int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                           NextTimeoutMs());
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        uint32_t ev = events[i].events;
        if (fd == listen_fd_) {
          AcceptAll();
          continue;
        }
        if (fd == wake_read_) {
          char buf[64];
          while (::read(wake_read_, buf, sizeof(buf)) > 0) {
          }
          continue;
        }
        auto it = conns_.find(fd);
        if (it == conns_.end()) continue;
        Conn& conn = it->second;
        bool ok = true;
        if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) ok = ReadFrom(conn);
        if (ok && (ev & EPOLLOUT)) ok = Flush(conn);
        if (!ok) Close(fd);
      }
      RunTimers();
    }
  }

  // Milliseconds until the earliest timer: a waiter's deadline, a handshake
  // deadline or the end of an accept pause.
  int NextTimeoutMs() {
    absl::Time next = absl::InfiniteFuture();
    if (!deadlines_.empty()) next = std::min(next, deadlines_.top().first);
    if (!handshakes_.empty()) next = std::min(next, handshakes_.front().first);
    if (accept_paused_) next = std::min(next, accept_resume_);
    if (next == absl::InfiniteFuture()) return -1;
    return static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(next - absl::Now(), absl::Milliseconds(1))), 0,
        60000));
  }

  void AcceptAll() {
    while (true) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) ShedOnFdExhaustion(errno);
        return;  // EAGAIN: drained
      }
      std::string ip, peer;
      PeerName(addr, &ip, &peer);
      if (!Admit(fd, ip, peer)) {
        ++refused_;
        ::close(fd);
        continue;
      }
      // A client sends its hello as soon as its connect completes, so by
      // the time it is accepted the hello has usually arrived: read it now.
      // Otherwise a burst of clients from one host (a node's ranks, or the
      // simulated ranks of bench/store_scale) would all count as pending
      // while this loop drains the queue, and those past
      // max_pending_per_peer would be refused and retry after a backoff.
      // The handshake and the token check are the same as on a later read.
      if (!ReadFrom(conns_.at(fd))) Close(fd);
    }
  }

  // Whether a new connection fits the caps; logs the refusal otherwise.
  bool Admit(int fd, const std::string& ip, const std::string& peer) {
    if (static_cast<int>(conns_.size()) >= options_.max_connections) {
      refuse_log_.Warn("store: refusing %s: %d connections already open (max_connections)",
                       peer, options_.max_connections);
      return false;
    }
    if (CountOf(pending_by_ip_, ip) >= options_.max_pending_per_peer) {
      refuse_log_.Warn(
          "store: refusing %s: %d connections from %s have not completed the handshake "
          "(max_pending_per_peer)",
          peer, options_.max_pending_per_peer, ip);
      return false;
    }
    if (CountOf(conns_by_ip_, ip) >= options_.max_connections_per_peer) {
      refuse_log_.Warn("store: refusing %s: %d connections open from %s "
                       "(max_connections_per_peer)",
                       peer, options_.max_connections_per_peer, ip);
      return false;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn& conn = conns_.try_emplace(fd, options_.token, &quota_).first->second;
    conn.fd = fd;
    conn.ip = ip;
    conn.peer = peer;
    conn.serial = ++next_serial_;
    ++pending_by_ip_[ip];
    ++conns_by_ip_[ip];
    handshakes_.push_back({absl::Now() + options_.handshake_timeout, {fd, conn.serial}});
    Watch(fd, EPOLLIN, EPOLL_CTL_ADD);
    return true;
  }

  static int CountOf(const std::unordered_map<std::string, int>& m, const std::string& ip) {
    auto it = m.find(ip);
    return it == m.end() ? 0 : it->second;
  }

  // Out of descriptors: close the reserve, accept and close what is pending
  // so those clients see a prompt close instead of hanging, reopen the
  // reserve, and stop watching the listener for a moment so as not to spin.
  void ShedOnFdExhaustion(int err) {
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    fd_log_.Warn("store: out of file descriptors (%s; open-file limit %llu, %d connections); "
                 "shedding new connections for %d ms. Raise `ulimit -n` on the store host",
                 std::strerror(err), static_cast<unsigned long long>(rl.rlim_cur),
                 static_cast<int>(conns_.size()), static_cast<int>(kAcceptPause / absl::Milliseconds(1)));
    if (reserve_fd_ >= 0) {
      ::close(reserve_fd_);
      reserve_fd_ = -1;
      for (int i = 0; i < 64; ++i) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        ++refused_;
        ::close(fd);
      }
      reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    if (!accept_paused_) {
      Watch(listen_fd_, 0, EPOLL_CTL_MOD);
      accept_paused_ = true;
    }
    accept_resume_ = absl::Now() + kAcceptPause;
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
      if (conn.pending && conn.session.greeted()) {
        conn.pending = false;
        --pending_by_ip_[conn.ip];
      }
      for (auto& p : parked) Park(conn, std::move(p));
      for (const std::string& key : conn.session.TakeWritten()) WakeWaitersOf(key);
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

  // Answers at once when the keys exist; otherwise parks under each missing key.
  void Park(Conn& conn, proto::ParkedRequest request) {
    std::vector<const std::string*> missing;
    for (const auto& k : request.keys) {
      if (data_.count(k) == 0) missing.push_back(&k);
    }
    if (missing.empty()) {
      conn.out += proto::Session::Answer(request, data_);
      return;
    }
    uint64_t id = ++next_waiter_;
    absl::Time deadline =
        absl::Now() + absl::Milliseconds(std::max<int64_t>(request.timeout_ms, 0));
    for (const std::string* k : missing) waiters_by_key_[*k].push_back(id);
    deadlines_.push({deadline, id});
    waiters_.emplace(id, Waiter{conn.fd, conn.serial, std::move(request)});
    conn.waiter_ids.insert(id);
  }

  // Answers the waiters of `key` whose keys all exist now.
  void WakeWaitersOf(const std::string& key) {
    auto list = waiters_by_key_.find(key);
    if (list == waiters_by_key_.end()) return;
    std::vector<uint64_t> ids = std::move(list->second);
    waiters_by_key_.erase(list);
    for (uint64_t id : ids) {
      auto w = waiters_.find(id);
      if (w == waiters_.end()) continue;  // answered, expired or closed
      const auto& keys = w->second.request.keys;
      auto still_missing = std::find_if(keys.begin(), keys.end(),
                                        [&](const std::string& k) { return !data_.count(k); });
      if (still_missing != keys.end()) {
        waiters_by_key_[*still_missing].push_back(id);
        continue;
      }
      Conn* conn = Live(w->second);
      if (conn != nullptr) {
        conn->waiter_ids.erase(id);
        conn->out += proto::Session::Answer(w->second.request, data_);
        if (!Flush(*conn)) pending_close_.push_back({conn->fd, conn->serial});
      }
      waiters_.erase(w);
    }
  }

  Conn* Live(const Waiter& w) {
    auto it = conns_.find(w.fd);
    if (it == conns_.end() || it->second.serial != w.serial) return nullptr;
    return &it->second;
  }

  void RunTimers() {
    absl::Time now = absl::Now();
    while (!deadlines_.empty() && deadlines_.top().first <= now) {
      uint64_t id = deadlines_.top().second;
      deadlines_.pop();
      auto w = waiters_.find(id);
      if (w == waiters_.end()) continue;  // lazily deleted
      Conn* conn = Live(w->second);
      if (conn != nullptr) {
        conn->waiter_ids.erase(id);
        conn->out += proto::Session::TimedOut(w->second.request, data_);
        if (!Flush(*conn)) pending_close_.push_back({conn->fd, conn->serial});
      }
      Forget(w);
    }
    while (!handshakes_.empty() && handshakes_.front().first <= now) {
      auto [fd, serial] = handshakes_.front().second;
      handshakes_.pop_front();
      auto it = conns_.find(fd);
      if (it == conns_.end() || it->second.serial != serial || !it->second.pending) continue;
      ++rejected_;
      handshake_log_.Warn("store: closing %s: no handshake within %s",
                          it->second.peer, absl::FormatDuration(options_.handshake_timeout));
      pending_close_.push_back({fd, serial});
    }
    if (accept_paused_ && accept_resume_ <= now) {
      accept_paused_ = false;
      Watch(listen_fd_, EPOLLIN, EPOLL_CTL_MOD);
    }
    for (auto [fd, serial] : std::exchange(pending_close_, {})) {
      auto it = conns_.find(fd);
      if (it != conns_.end() && it->second.serial == serial) Close(fd);
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
    bool want_out = !conn.out.empty();
    if (want_out != conn_watching_out(conn)) {
      Watch(conn.fd, want_out ? (EPOLLIN | EPOLLOUT) : EPOLLIN, EPOLL_CTL_MOD);
      watching_out_[conn.fd] = want_out;
    }
    return true;
  }

  bool conn_watching_out(const Conn& conn) {
    auto it = watching_out_.find(conn.fd);
    return it != watching_out_.end() && it->second;
  }

  // Drops a waiter that will not be answered from its keys' lists (its heap
  // entry is skipped lazily), so keys nobody writes do not pile up ids.
  void Forget(std::unordered_map<uint64_t, Waiter>::iterator w) {
    for (const std::string& key : w->second.request.keys) {
      auto list = waiters_by_key_.find(key);
      if (list == waiters_by_key_.end()) continue;
      auto& ids = list->second;
      ids.erase(std::remove(ids.begin(), ids.end(), w->first), ids.end());
      if (ids.empty()) waiters_by_key_.erase(list);
    }
    waiters_.erase(w);
  }

  void Close(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    for (uint64_t id : it->second.waiter_ids) {
      auto w = waiters_.find(id);
      if (w != waiters_.end()) Forget(w);
    }
    if (it->second.pending) --pending_by_ip_[it->second.ip];
    if (--conns_by_ip_[it->second.ip] == 0) {
      conns_by_ip_.erase(it->second.ip);
      pending_by_ip_.erase(it->second.ip);
    }
    watching_out_.erase(fd);
    conns_.erase(it);
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
  }

  const int listen_fd_, wake_read_, wake_write_;
  const std::string host_;
  const int port_;
  const TcpStoreServerOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> rejected_{0};
  // Owned by the serving thread only.
  int epoll_fd_ = -1;
  int reserve_fd_ = -1;  // given up on EMFILE so the pending can be shed
  bool accept_paused_ = false;
  absl::Time accept_resume_;
  int64_t refused_ = 0;
  uint64_t next_serial_ = 0;
  uint64_t next_waiter_ = 0;
  std::unordered_map<int, Conn> conns_;
  std::unordered_map<int, bool> watching_out_;
  std::unordered_map<std::string, int> pending_by_ip_, conns_by_ip_;
  // Handshake deadlines are in accept order, so a deque is already sorted.
  std::deque<std::pair<absl::Time, std::pair<int, uint64_t>>> handshakes_;
  std::unordered_map<uint64_t, Waiter> waiters_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_by_key_;
  using Deadline = std::pair<absl::Time, uint64_t>;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> deadlines_;
  std::vector<std::pair<int, uint64_t>> pending_close_;  // fd, serial
  RateLimitedLog refuse_log_, fd_log_, handshake_log_;
  proto::KeyValueMap data_;
  proto::StoreQuota quota_;  // the bytes data_ holds
  std::thread thread_;  // joined in the destructor
};

absl::StatusOr<TcpStoreServerOptions> JobStoreOptions(const std::string& host, int port,
                                                      int world_size,
                                                      const std::string& token) {
  absl::StatusOr<int64_t> max_bytes = EnvInt("SYNCLINE_STORE_MAX_BYTES", 1);
  if (!max_bytes.ok()) return max_bytes.status();
  TcpStoreServerOptions options;
  options.host = host;
  options.port = port;
  options.max_connections = StoreMaxConnectionsFor(world_size);
  options.max_store_bytes = static_cast<size_t>(*max_bytes);
  options.token = token;
  return options;
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions& options) {
  RaiseFdLimit();
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
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, ListenBacklog()) == 0) break;
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
  auto impl = std::make_unique<Impl>(fd, pipe_fds[0], pipe_fds[1], options.host, port,
                                     options);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStoreServer::~TcpStoreServer() = default;
int TcpStoreServer::port() const { return impl_->port(); }
const std::string& TcpStoreServer::host() const { return impl_->host(); }
int64_t TcpStoreServer::rejected_frames() const { return impl_->rejected(); }

}  // namespace syncline
