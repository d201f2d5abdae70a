// socket_iface_test.cc: interface selection rules (NCCL syntax, loopback).
#include "backends/common/socket_iface.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncline::backend {
namespace {

using ::testing::HasSubstr;

const std::vector<LocalInterface> kInterfaces = {
    {"lo", "127.0.0.1", true},
    {"docker0", "172.17.0.1", false},
    {"eth0", "10.213.0.2", false},
    {"ib0", "10.214.0.2", false},
};

TEST(InterfaceMatches, NcclSyntax) {
  EXPECT_TRUE(InterfaceMatches("eth", "eth0"));
  EXPECT_TRUE(InterfaceMatches("ib,eth", "eth0"));
  EXPECT_FALSE(InterfaceMatches("ib", "eth0"));
  EXPECT_TRUE(InterfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(InterfaceMatches("=eth", "eth0"));
  EXPECT_FALSE(InterfaceMatches("^lo,docker", "lo"));
  EXPECT_FALSE(InterfaceMatches("^lo,docker", "docker0"));
  EXPECT_TRUE(InterfaceMatches("^lo,docker", "eth0"));
  EXPECT_FALSE(InterfaceMatches("^=eth0", "eth0"));
  EXPECT_TRUE(InterfaceMatches("^=eth", "eth0"));
}

TEST(ChooseSocketAddress, ExclusionSkipsLoopbackAndDocker) {
  SocketChoice c;
  std::string error;
  ASSERT_TRUE(ChooseSocketAddress("^lo,docker", "10.213.0.1", true, kInterfaces, &c, &error))
      << error;
  EXPECT_EQ(c.address, "10.213.0.2");
  EXPECT_EQ(c.iface, "eth0");
}

TEST(ChooseSocketAddress, PrefixPicksTheFirstMatch) {
  SocketChoice c;
  std::string error;
  ASSERT_TRUE(ChooseSocketAddress("ib", "10.213.0.1", true, kInterfaces, &c, &error));
  EXPECT_EQ(c.address, "10.214.0.2");
}

TEST(ChooseSocketAddress, MultiHostNeverSilentlyUsesLoopback) {
  SocketChoice c;
  std::string error;
  EXPECT_FALSE(ChooseSocketAddress("lo", "10.213.0.1", true, kInterfaces, &c, &error));
  EXPECT_THAT(error, HasSubstr("loopback is not usable in a multi-host job"));
  EXPECT_THAT(error, HasSubstr("eth0 (10.213.0.2)"));
}

TEST(ChooseSocketAddress, UnknownInterfaceListsTheAvailableOnes) {
  SocketChoice c;
  std::string error;
  EXPECT_FALSE(ChooseSocketAddress("=eth9", "127.0.0.1", false, kInterfaces, &c, &error));
  EXPECT_THAT(error, HasSubstr("'=eth9' matches no usable interface"));
  EXPECT_THAT(error, HasSubstr("lo (127.0.0.1)"));
}

TEST(ChooseSocketAddress, SingleHostStaysOnLoopback) {
  SocketChoice c;
  std::string error;
  ASSERT_TRUE(ChooseSocketAddress("", "127.0.0.1", false, kInterfaces, &c, &error));
  EXPECT_EQ(c.address, "127.0.0.1");
  ASSERT_TRUE(ChooseSocketAddress("", "", false, kInterfaces, &c, &error));
  EXPECT_EQ(c.address, "127.0.0.1");
}

TEST(ChooseSocketAddress, RouteToALoopbackMasterInAMultiHostJobIsRefused) {
  SocketChoice c;
  std::string error;
  EXPECT_FALSE(ChooseSocketAddress("", "127.0.0.1", true, kInterfaces, &c, &error));
  EXPECT_THAT(error, HasSubstr("would use loopback"));
}

}  // namespace
}  // namespace syncline::backend
