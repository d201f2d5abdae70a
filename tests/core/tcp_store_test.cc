// tcp_store_test.cc: the TCP store against hostile, stalled and foreign peers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/socket_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/tcp_store.h"

namespace syncline {
namespace {

int RawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

void SendRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// Magic, version and an empty token (the test host is little endian).
std::string Hello() {
  std::string h(12, '\0');
  uint32_t magic = kStoreMagic, version = kStoreProtocolVersion;
  std::memcpy(h.data(), &magic, 4);
  std::memcpy(h.data() + 4, &version, 4);
  return h;
}

using ::syncline::testing::ClosedByPeer;

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
    client_ = Connect();
  }
  std::shared_ptr<Store> Connect() {
    auto c = ConnectTcpStore({.host = "127.0.0.1", .port = server_->port(),
                              .connect_timeout = absl::Seconds(5)});
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }
  // The server still answers a well-behaved client quickly.
  void ExpectStillServing() {
    absl::Time start = absl::Now();
    auto c = Connect();
    ASSERT_TRUE(c->Set("alive", "yes").ok());
    EXPECT_EQ(*c->Get("alive", absl::Seconds(1)), "yes");
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  }
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> client_;
};

TEST_F(TcpStoreTest, BadHandshakeIsRefusedOthersServed) {
  int fd = RawConnect(server_->port());
  SendRaw(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  EXPECT_GE(server_->rejected_frames(), 1);
  ExpectStillServing();
}

TEST_F(TcpStoreTest, FourGigabyteFrameIsRefusedWithoutAllocating) {
  int fd = RawConnect(server_->port());
  SendRaw(fd, Hello());
  SendRaw(fd, std::string("\xff\xff\xff\xff\x01", 5));  // claims a 4 GiB body
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  EXPECT_GE(server_->rejected_frames(), 1);
  ExpectStillServing();
}

TEST_F(TcpStoreTest, MalformedFieldLengthIsRefused) {
  int fd = RawConnect(server_->port());
  SendRaw(fd, Hello());
  // Body of 9 bytes: SET, then a key length of 1,000,000 that the body lacks.
  std::string body("\x01\x40\x42\x0f\x00", 5);
  body += "abcd";
  std::string frame(4, '\0');
  uint32_t len = body.size();
  std::memcpy(frame.data(), &len, 4);
  SendRaw(fd, frame + body);
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  ExpectStillServing();
}

TEST_F(TcpStoreTest, StalledClientDoesNotBlockOthers) {
  int fd = RawConnect(server_->port());
  SendRaw(fd, Hello());
  SendRaw(fd, std::string("\x40\x00\x00\x00\x01\x02", 6));  // half a frame, then silence
  ExpectStillServing();
  ::close(fd);
}

TEST_F(TcpStoreTest, ManyConcurrentClients) {
  constexpr int kClients = 32, kAdds = 50;
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&] {
      auto c = Connect();
      for (int j = 0; j < kAdds; ++j) ASSERT_TRUE(c->Add("counter", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*client_->Add("counter", 0), kClients * kAdds);
}

TEST_F(TcpStoreTest, ServerExitFailsPendingGetPromptly) {
  std::atomic<bool> done{false};
  absl::Status status;
  std::thread waiter([&] {
    status = client_->Get("never", absl::Seconds(30)).status();
    done = true;
  });
  absl::SleepFor(absl::Milliseconds(200));
  absl::Time start = absl::Now();
  server_.reset();
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("closed the connection"));
  // Later calls fail at once, with the reason.
  EXPECT_THAT(std::string(client_->Set("x", "y").message()), ::testing::HasSubstr("lost"));
}

TEST(TcpStoreToken, OnlyClientsWithTheTokenAreServed) {
  auto server = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0, .token = "s3cret"});
  absl::Time start = absl::Now();
  auto wrong = ConnectTcpStore({.host = "127.0.0.1", .port = server->port(),
                                .connect_timeout = absl::Seconds(5), .token = "guess"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(absl::IsUnavailable(wrong.status())) << wrong.status();
  EXPECT_THAT(std::string(wrong.status().message()), ::testing::HasSubstr("refused this client's token"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "a refusal is final, not retried";
  auto none = ConnectTcpStore({.host = "127.0.0.1", .port = server->port(),
                               .connect_timeout = absl::Seconds(5)});
  ASSERT_FALSE(none.ok());
  EXPECT_GE(server->rejected_frames(), 2);
  auto right = ConnectTcpStore({.host = "127.0.0.1", .port = server->port(),
                                .connect_timeout = absl::Seconds(5), .token = "s3cret"});
  ASSERT_TRUE(right.ok()) << right.status();
  ASSERT_TRUE((*right)->Set("k", "v").ok());
  EXPECT_EQ(*(*right)->Get("k", absl::Seconds(1)), "v");
}

TEST(TcpStoreServerStart, PortInUseIsExplained) {
  auto first = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
  auto second = TcpStoreServer::Start({.host = "127.0.0.1", .port = first->port()});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              ::testing::HasSubstr(absl::StrCat("127.0.0.1:", first->port())));
  EXPECT_THAT(std::string(second.status().message()),
              ::testing::HasSubstr("another program uses that port"));
}

// A foreign program on the port: it talks, but not our protocol (final at
// once), or it never answers (retried until the timeout).
TEST(TcpStoreClient, AnsweringForeignListenerIsFinalSilentOneIsRetried) {
  for (bool silent : {false, true}) {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(listener, 16), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    int port = ntohs(addr.sin_port);
    std::thread foreign([&] {
      int c = ::accept(listener, nullptr, nullptr);
      if (!silent) SendRaw(c, "SSH-2.0-OpenSSH_9.2\r\n");
      absl::SleepFor(absl::Seconds(3));
      ::close(c);
    });
    absl::Time start = absl::Now();
    auto client = ConnectTcpStore({.host = "127.0.0.1", .port = port,
                                   .connect_timeout = absl::Seconds(2)});
    absl::Duration took = absl::Now() - start;
    foreign.join();
    ::close(listener);
    ASSERT_FALSE(client.ok());
    const std::string message(client.status().message());
    EXPECT_THAT(message, ::testing::HasSubstr(absl::StrCat("127.0.0.1:", port)));
    if (silent) {
      // No answer at all may be a store too loaded to answer yet: retried
      // until the timeout, then both possibilities are named.
      EXPECT_THAT(message,
                  ::testing::HasSubstr("did not complete the Syncline store handshake"));
      EXPECT_THAT(message, ::testing::HasSubstr("the store is overloaded"));
      EXPECT_THAT(message, ::testing::HasSubstr("is not a Syncline store"));
      EXPECT_GE(took, absl::Seconds(2)) << "given up before the connect timeout";
    } else {
      EXPECT_THAT(message, ::testing::HasSubstr("is not a Syncline store"));
      EXPECT_LT(took, absl::Seconds(1)) << "a wrong answer is final";
    }
  }
}

TEST(TcpStoreClient, NobodyListeningFailsAfterTheTimeout) {
  int port;
  {
    auto probe = *TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
    port = probe->port();
  }
  absl::Time start = absl::Now();
  auto client = ConnectTcpStore({.host = "127.0.0.1", .port = port,
                                 .connect_timeout = absl::Seconds(1)});
  absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(std::string(client.status().message()),
              ::testing::HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_GE(took, absl::Milliseconds(900));
  EXPECT_LT(took, absl::Seconds(2));
}

}  // namespace
}  // namespace syncline
