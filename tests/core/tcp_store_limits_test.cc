// tcp_store_limits_test.cc: the TCP store under starvation attacks: idle
// sockets that never handshake, a server out of file descriptors, one host
// hogging the pending-handshake slots, and many parked waits; and the client
// against a store too busy to answer its handshake.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/scoped_env.h"
#include "common/socket_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/tcp_store.h"
#include "tcp_store_protocol.h"

namespace syncline {
namespace {

namespace proto = store_protocol;

// Connects from `source` (a 127.0.0.0/8 address) to 127.0.0.1:port; -1 on failure.
int RawConnect(int port, const char* source = nullptr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (source != nullptr) {
    sockaddr_in src{};
    src.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &src.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string Hello() {
  std::string h = proto::EncodeHello();
  h.append(4, '\0');  // empty token
  return h;
}

using ::syncline::testing::ClosedByPeer;
using ::syncline::testing::ScopedEnv;

bool ReadExactly(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t got = ::read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= got;
  }
  return true;
}

// A store server in a forked child whose RLIMIT_NOFILE is `fd_limit` (soft
// and hard, so the server cannot raise it). The parent asks it for its CPU
// time over a window through a pipe.
class ForkedServer {
 public:
  ForkedServer(int fd_limit, absl::Duration handshake_timeout,
               int max_pending_per_peer = 100000) {
    int to_child[2], to_parent[2];
    EXPECT_EQ(::pipe(to_child), 0);
    EXPECT_EQ(::pipe(to_parent), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(to_child[1]);
      ::close(to_parent[0]);
      rlimit rl{static_cast<rlim_t>(fd_limit), static_cast<rlim_t>(fd_limit)};
      ::setrlimit(RLIMIT_NOFILE, &rl);
      TcpStoreServerOptions options{.host = "127.0.0.1", .port = 0};
      options.handshake_timeout = handshake_timeout;
      options.max_pending_per_peer = max_pending_per_peer;
      auto server = TcpStoreServer::Start(options);
      if (!server.ok()) {
        fprintf(stderr, "forked store server: %s\n", server.status().ToString().c_str());
        ::_exit(2);
      }
      int port = (*server)->port();
      (void)!::write(to_parent[1], &port, sizeof(port));
      char c;
      while (::read(to_child[0], &c, 1) == 1) {  // 'm': mark, 'r': report
        static double mark = 0;
        rusage ru{};
        ::getrusage(RUSAGE_SELF, &ru);
        double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
                     ru.ru_stime.tv_usec / 1e6;
        if (c == 'm') mark = cpu;
        double delta = cpu - mark;
        (void)!::write(to_parent[1], &delta, sizeof(delta));
      }
      ::_exit(0);
    }
    ::close(to_child[0]);
    ::close(to_parent[1]);
    to_child_ = to_child[1];
    from_child_ = to_parent[0];
    EXPECT_TRUE(ReadExactly(from_child_, reinterpret_cast<char*>(&port_), sizeof(port_)));
  }
  ~ForkedServer() {
    ::close(to_child_);
    ::close(from_child_);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }
  // Freezes the whole server (SIGSTOP): the kernel still completes TCP
  // connections into its listen queue, but nothing is accepted or answered,
  // as in a store too loaded to keep up. Continue() thaws it.
  // Returns once every thread of the server has stopped.
  void Stop() {
    ASSERT_EQ(::kill(pid_, SIGSTOP), 0);
    absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!AllThreadsStopped() && absl::Now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(AllThreadsStopped());
  }
  void Continue() { EXPECT_EQ(::kill(pid_, SIGCONT), 0); }
  // CPU seconds the server process used since the last Mark().
  double Ask(char c) {
    EXPECT_EQ(::write(to_child_, &c, 1), 1);
    double v = -1;
    EXPECT_TRUE(ReadExactly(from_child_, reinterpret_cast<char*>(&v), sizeof(v)));
    return v;
  }
  void Mark() { Ask('m'); }
  double CpuSinceMark() { return Ask('r'); }

 private:
  // Whether every thread's state in /proc/<pid>/task/*/stat is 'T'.
  bool AllThreadsStopped() const {
    std::string dir = absl::StrCat("/proc/", pid_, "/task");
    DIR* tasks = ::opendir(dir.c_str());
    if (tasks == nullptr) return false;
    bool stopped = true;
    while (dirent* e = ::readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream stat(absl::StrCat(dir, "/", e->d_name, "/stat"));
      std::string text((std::istreambuf_iterator<char>(stat)),
                       std::istreambuf_iterator<char>());
      size_t paren = text.rfind(')');
      if (paren == std::string::npos || paren + 2 >= text.size() ||
          text[paren + 2] != 'T') {
        stopped = false;
      }
    }
    ::closedir(tasks);
    return stopped;
  }

  pid_t pid_ = -1;
  int port_ = 0;
  int to_child_ = -1, from_child_ = -1;
};

// How many connections wait in the accept queue of the IPv4 listener on
// `port` (/proc/net/tcp shows it as rx_queue of the LISTEN row); -1 if none.
int AcceptQueueLength(int port) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  char local[32];
  std::snprintf(local, sizeof(local), ":%04X", port);
  while (std::getline(table, line)) {
    std::istringstream row(line);
    std::string slot, local_address, remote, state, queues;
    row >> slot >> local_address >> remote >> state >> queues;
    if (state != "0A" || local_address.size() < 5 ||
        local_address.compare(local_address.size() - 5, 5, local) != 0) {
      continue;
    }
    return static_cast<int>(std::stoul(queues.substr(queues.find(':') + 1), nullptr, 16));
  }
  return -1;
}

void ExpectServes(int port) {
  auto store = ConnectTcpStore(
      {.host = "127.0.0.1", .port = port, .connect_timeout = absl::Seconds(20)});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("alive", "yes").ok());
  auto v = (*store)->Get("alive", absl::Seconds(5));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "yes");
}

// 300 idle sockets against a server limited to 256 fds: the server neither
// spins nor starves a good client, and closes the idle ones by the deadline.
TEST(TcpStoreLimits, IdleSocketsUnderLowFdLimitAreClosedWithoutSpinning) {
  ForkedServer server(256, absl::Seconds(1));
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    int fd = RawConnect(server.port());
    if (fd >= 0) idle.push_back(fd);
  }
  ASSERT_GT(idle.size(), 250u);
  server.Mark();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  double cpu = server.CpuSinceMark();
  EXPECT_LT(cpu, 0.5) << "server CPU-s over 3 s with 300 idle sockets";
  ExpectServes(server.port());
  int closed = 0;
  for (int fd : idle) {
    closed += ClosedByPeer(fd, absl::Seconds(5)) ? 1 : 0;
    ::close(fd);
  }
  EXPECT_EQ(closed, static_cast<int>(idle.size()));
}

// A flood that keeps the server out of descriptors: no spin, and the server
// recovers once the flood ends.
TEST(TcpStoreLimits, EmfileFloodDoesNotSpinAndRecovers) {
  ForkedServer server(64, absl::Seconds(30));
  std::vector<int> flood;
  for (int i = 0; i < 200; ++i) {
    int fd = RawConnect(server.port());
    if (fd >= 0) flood.push_back(fd);
  }
  server.Mark();
  absl::Time end = absl::Now() + absl::Seconds(3);
  while (absl::Now() < end) {  // keep the backlog full
    int fd = RawConnect(server.port());
    if (fd >= 0) flood.push_back(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  double cpu = server.CpuSinceMark();
  EXPECT_LT(cpu, 0.5) << "server CPU-s over 3 s while out of descriptors";
  for (int fd : flood) ::close(fd);
  ExpectServes(server.port());
}

TEST(TcpStoreLimits, HandshakeDeadlineClosesSilentConnections) {
  TcpStoreServerOptions options{.host = "127.0.0.1", .port = 0};
  options.handshake_timeout = absl::Milliseconds(300);
  auto server = *TcpStoreServer::Start(options);
  int fd = RawConnect(server->port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(ClosedByPeer(fd, absl::Seconds(5)));
  ::close(fd);
  ExpectServes(server->port());
}

// One host's pending handshakes are capped; another host is still served.
TEST(TcpStoreLimits, PendingCapPerPeerLeavesOtherHostsServed) {
  TcpStoreServerOptions options{.host = "127.0.0.1", .port = 0};
  options.max_pending_per_peer = 8;
  options.handshake_timeout = absl::Seconds(60);
  auto server = *TcpStoreServer::Start(options);
  std::vector<int> hog;
  for (int i = 0; i < 8; ++i) hog.push_back(RawConnect(server->port(), "127.0.0.1"));
  // Let the server admit the first eight before the extras arrive.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<int> extra;
  for (int i = 0; i < 4; ++i) extra.push_back(RawConnect(server->port(), "127.0.0.1"));
  for (int fd : extra) {
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(ClosedByPeer(fd, absl::Seconds(5))) << "an extra pending connection was not refused";
    ::close(fd);
  }
  int other = RawConnect(server->port(), "127.0.0.2");
  ASSERT_GE(other, 0) << "cannot bind 127.0.0.2";
  std::string hello = Hello();
  ASSERT_EQ(::send(other, hello.data(), hello.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(hello.size()));
  char reply[proto::kHelloBytes + 1];
  ASSERT_TRUE(ReadExactly(other, reply, sizeof(reply)));
  EXPECT_EQ(reply[proto::kHelloBytes], 0) << "127.0.0.2 was not accepted";
  ::close(other);
  for (int fd : hog) {
    EXPECT_FALSE(ClosedByPeer(fd, absl::Milliseconds(200))) << "a connection within the cap was closed";
    ::close(fd);
  }
}

// A burst of clients from one host that have all sent their hello by the
// time the store accepts them (a node's ranks starting together) is served
// whole: a hello already there is read at accept, so those clients never
// count against max_pending_per_peer. The cap still holds for connections
// that stay silent: of the twelve queued after the burst, eight are admitted
// (and left open until the handshake deadline) and four are refused.
TEST(TcpStoreLimits, ABurstThatAlreadySentItsHelloIsNotRefusedAsPending) {
  constexpr int kCap = 8;
  constexpr int kGreeting = 5 * kCap;
  constexpr int kSilent = kCap + 4;
  ForkedServer server(1024, absl::Seconds(60), kCap);
  server.Stop();  // the burst lands in the listen queue, hellos included
  const std::string hello = Hello();
  std::vector<int> greeting, silent;
  for (int i = 0; i < kGreeting; ++i) {
    int fd = RawConnect(server.port(), "127.0.0.1");
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(hello.size()));
    greeting.push_back(fd);
  }
  for (int i = 0; i < kSilent; ++i) {
    int fd = RawConnect(server.port(), "127.0.0.1");
    ASSERT_GE(fd, 0);
    silent.push_back(fd);
  }
  EXPECT_EQ(AcceptQueueLength(server.port()), kGreeting + kSilent);
  server.Continue();
  int served = 0;
  for (int fd : greeting) {
    char reply[proto::kHelloBytes + 1];
    if (ReadExactly(fd, reply, sizeof(reply)) && reply[proto::kHelloBytes] == 0) ++served;
    ::close(fd);
  }
  EXPECT_EQ(served, kGreeting) << "clients that had sent their hello were refused";
  int refused = 0;
  for (int fd : silent) {
    if (ClosedByPeer(fd, absl::Milliseconds(200))) ++refused;
    ::close(fd);
  }
  EXPECT_EQ(refused, kSilent - kCap) << "the pending cap did not hold for silent sockets";
}

// Writes beyond max_store_bytes are refused with a message; nothing is lost.
TEST(TcpStoreLimits, QuotaRefusesWritesBeyondItAndKeepsServing) {
  TcpStoreServerOptions options{.host = "127.0.0.1", .port = 0};
  options.max_store_bytes = 10000;
  auto server = *TcpStoreServer::Start(options);
  auto store = *ConnectTcpStore({.host = "127.0.0.1", .port = server->port()});
  std::string value(1000, 'x');
  int stored = 0;
  absl::Status refused;
  for (int i = 0; i < 20 && refused.ok(); ++i) {
    refused = store->Set(absl::StrCat("key", i), value);
    if (refused.ok()) ++stored;
  }
  ASSERT_FALSE(refused.ok()) << "20 KB went into a 10 KB store";
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("quota"));
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("max_store_bytes"));
  EXPECT_EQ(stored, 9);
  for (int i = 0; i < stored; ++i) {
    auto v = store->Get(absl::StrCat("key", i), absl::Seconds(5));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, value);
  }
  ASSERT_TRUE(store->Delete("key0").ok());  // frees room
  EXPECT_TRUE(store->Set("after", "delete").ok());
  ExpectServes(server->port());
}

// A store too busy to answer a handshake in time is retried until the
// connect timeout, not taken for a foreign program: the client's first
// attempt times out while the server is frozen, its second waits in the
// listen queue behind it, and once the server thaws the client connects and
// every key, written before and after, is there.
TEST(TcpStoreLimits, AHandshakeThatTimesOutOnAStalledStoreIsRetried) {
  ForkedServer server(1024, absl::Seconds(30));
  auto writer = ConnectTcpStore({.host = "127.0.0.1", .port = server.port()});
  ASSERT_TRUE(writer.ok()) << writer.status();
  constexpr int kKeys = 50;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE((*writer)->Set(absl::StrCat("before/", i), absl::StrCat(i)).ok());
  }
  ASSERT_EQ(AcceptQueueLength(server.port()), 0);
  server.Stop();
  std::atomic<bool> client_returned{false};
  absl::StatusOr<std::shared_ptr<Store>> late;
  std::thread client([&] {
    late = ConnectTcpStore({.host = "127.0.0.1",
                            .port = server.port(),
                            .connect_timeout = absl::Seconds(120),
                            .handshake_timeout = absl::Milliseconds(200)});
    client_returned = true;
  });
  // Two connections queued: the first attempt timed out and a second began.
  absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (AcceptQueueLength(server.port()) < 2 && !client_returned &&
         absl::Now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(AcceptQueueLength(server.port()), 2) << "the client did not try again";
  server.Continue();
  client.join();
  ASSERT_TRUE(late.ok()) << late.status();
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE((*late)->Set(absl::StrCat("after/", i), absl::StrCat(i)).ok());
  }
  for (const char* phase : {"before/", "after/"}) {
    for (int i = 0; i < kKeys; ++i) {
      auto v = (*writer)->Get(absl::StrCat(phase, i), absl::Seconds(5));
      ASSERT_TRUE(v.ok()) << phase << i << ": " << v.status();
      EXPECT_EQ(*v, absl::StrCat(i));
    }
  }
  EXPECT_EQ(*(*late)->NumKeys(), 2 * kKeys);
}

// A job's store takes its quota from SYNCLINE_STORE_MAX_BYTES: the refusal
// names the variable, what is stored stays, and the store keeps serving.
TEST(TcpStoreLimits, QuotaFromTheEnvironmentIsNamedInTheRefusal) {
  ScopedEnv quota("SYNCLINE_STORE_MAX_BYTES", "3000");
  auto options = JobStoreOptions("127.0.0.1", 0, 4, "");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->max_store_bytes, 3000u);
  auto server = *TcpStoreServer::Start(*options);
  auto store = *ConnectTcpStore({.host = "127.0.0.1", .port = server->port()});
  ASSERT_TRUE(store->Set("small", std::string(1000, 's')).ok());
  absl::Status refused = store->Set("large", std::string(4000, 'l'));
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()),
              ::testing::HasSubstr("SYNCLINE_STORE_MAX_BYTES"));
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("3000-byte limit"));
  EXPECT_EQ(*store->Get("small", absl::Seconds(5)), std::string(1000, 's'));
  EXPECT_EQ(*store->Check({"large"}), std::vector<bool>{false})
      << "a refused write left a key";
  ExpectServes(server->port());
}

TEST(TcpStoreLimits, AQuotaThatIsNoPositiveNumberIsRefusedNamingTheVariable) {
  for (const char* bad : {"0", "-4096", "lots", "1.5e9", "12abc"}) {
    ScopedEnv quota("SYNCLINE_STORE_MAX_BYTES", bad);
    auto options = JobStoreOptions("127.0.0.1", 0, 4, "");
    ASSERT_FALSE(options.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(options.status())) << options.status();
    EXPECT_THAT(std::string(options.status().message()),
                ::testing::HasSubstr(absl::StrCat("SYNCLINE_STORE_MAX_BYTES=", bad)));
  }
}

// 2,000 GETs parked on distinct keys, then 2,000 SETs: each GET gets its value.
TEST(TcpStoreLimits, ManyParkedWaitsOnDistinctKeysAllComplete) {
  auto server = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
  constexpr int kKeys = 2000;
  int fd = RawConnect(server->port());
  ASSERT_GE(fd, 0);
  std::string request = Hello();
  for (int i = 0; i < kKeys; ++i) {
    request += proto::Writer(static_cast<uint8_t>(proto::Command::kGet))
                   .Bytes(absl::StrCat("k", i))
                   .Int(60000)
                   .Frame();
  }
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  char hello[proto::kHelloBytes + 1];
  ASSERT_TRUE(ReadExactly(fd, hello, sizeof(hello)));
  auto setter = *ConnectTcpStore({.host = "127.0.0.1", .port = server->port()});
  for (int i = kKeys - 1; i >= 0; --i) {  // reverse order: replies follow the SETs
    ASSERT_TRUE(setter->Set(absl::StrCat("k", i), absl::StrCat("v", i)).ok());
  }
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (int i = kKeys - 1; i >= 0; --i) {
    char len_bytes[4];
    ASSERT_TRUE(ReadExactly(fd, len_bytes, 4)) << "reply " << i;
    std::string body(proto::LoadU32(len_bytes), '\0');
    ASSERT_TRUE(ReadExactly(fd, body.data(), body.size()));
    proto::Reader r(body);
    uint8_t code;
    std::string value;
    ASSERT_TRUE(r.U8(&code) && r.Bytes(&value, 1 << 20));
    EXPECT_EQ(code, static_cast<uint8_t>(proto::Code::kOk));
    EXPECT_EQ(value, absl::StrCat("v", i));
  }
  ::close(fd);
}

}  // namespace
}  // namespace syncline
