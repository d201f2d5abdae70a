// ucx_test_env.cc: keeps the tcp registration of the UCX tests on loopback.
//
// ctest gives each registration one environment variable (CMake 3.25's
// gtest_discover_tests splits a list-valued ENVIRONMENT into separate
// arguments, so only the first would be set): UCX_TLS. When it selects
// tcp, this initializer also pins UCX_NET_DEVICES to lo before main(), so
// the test ranks (which inherit the environment) never use another
// interface. An explicit UCX_NET_DEVICES wins.
#include <cstdlib>
#include <cstring>

namespace {

const bool kLoopbackOnly = [] {
  const char* tls = std::getenv("UCX_TLS");
  if (tls != nullptr && std::strcmp(tls, "tcp") == 0) setenv("UCX_NET_DEVICES", "lo", 0);
  return true;
}();

}  // namespace
