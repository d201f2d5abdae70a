// socket_iface.cc: interface selection with NCCL's include/exclude syntax.
#include "backends/common/socket_iface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace syncline::backend {
namespace {

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool IsLoopbackName(const std::string& host) {
  return host.empty() || host.rfind("127.", 0) == 0 || host == "localhost" || host == "::1";
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string Describe(const std::vector<LocalInterface>& interfaces) {
  std::string out;
  for (const auto& i : interfaces) {
    if (!out.empty()) out += ", ";
    out += i.name + " (" + i.address + ")";
  }
  return out.empty() ? "none" : out;
}

// Local address of the route to `host`; empty if there is none.
std::string RouteTo(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0) return "";
  std::string result;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char buf[INET_ADDRSTRLEN];
      ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf));
      result = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return result;
}

}  // namespace

std::vector<LocalInterface> ListInterfaces() {
  std::vector<LocalInterface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP)) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf,
                sizeof(buf));
    out.push_back({i->ifa_name, buf, (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return out;
}

bool InterfaceMatches(const std::string& raw, const std::string& name) {
  std::string spec = raw;
  bool exclude = !spec.empty() && spec[0] == '^';
  if (exclude) spec.erase(0, 1);
  bool exact = !spec.empty() && spec[0] == '=';
  if (exact) spec.erase(0, 1);
  bool listed = false;
  for (const std::string& item : SplitComma(spec)) {
    listed = listed || (exact ? name == item : name.rfind(item, 0) == 0);
  }
  return exclude ? !listed : listed;
}

bool ChooseSocketAddress(const std::string& spec, const std::string& master, bool multi_host,
                         const std::vector<LocalInterface>& interfaces, SocketChoice* choice,
                         std::string* error) {
  if (!spec.empty()) {
    for (const LocalInterface& i : interfaces) {
      if (!InterfaceMatches(spec, i.name)) continue;
      if (i.loopback && multi_host) continue;  // never silently loopback
      *choice = {i.address, i.name, "interface " + i.name + " selected by '" + spec + "'"};
      return true;
    }
    *error = "socket interface spec '" + spec + "' matches no usable interface" +
             (multi_host ? " (loopback is not usable in a multi-host job)" : "") +
             "; interfaces here: " + Describe(interfaces) +
             ". Set SYNCLINE_SOCKET_IFNAME to one of them (e.g. eth0, or ^lo,docker)";
    return false;
  }
  if (!multi_host && IsLoopbackName(master)) {
    *choice = {"127.0.0.1", "lo", "single-host job: loopback"};
    return true;
  }
  std::string local = RouteTo(master.empty() ? "127.0.0.1" : master);
  bool loopback = local.empty() || local.rfind("127.", 0) == 0;
  if (multi_host && loopback) {
    *error = "this multi-host job would use loopback (route to MASTER_ADDR=" + master +
             " goes through " + (local.empty() ? std::string("nothing") : local) +
             "), which peers on other hosts cannot reach; set MASTER_ADDR to an address "
             "of the master host that the others can reach, or SYNCLINE_SOCKET_IFNAME "
             "(interfaces here: " + Describe(interfaces) + ")";
    return false;
  }
  std::string iface;
  for (const LocalInterface& i : interfaces) {
    if (i.address == local) iface = i.name;
  }
  *choice = {local, iface, "route to the master " + master + " uses " + local};
  return true;
}

bool ChooseSocketAddressFromEnv(const char* transport_var, int world_size,
                                SocketChoice* choice, std::string* error) {
  std::string spec = Env("SYNCLINE_SOCKET_IFNAME");
  if (spec.empty() && transport_var != nullptr) spec = Env(transport_var);
  std::string master = Env("SYNCLINE_MASTER_ADDR");
  if (master.empty()) master = Env("MASTER_ADDR");
  // Every rank reached the store at MASTER_ADDR; if that is loopback they all
  // run on this host (even as several "nodes"), so loopback is right. A
  // routable master means peers may be elsewhere.
  (void)world_size;
  bool multi_host = !IsLoopbackName(master);
  return ChooseSocketAddress(spec, master, multi_host, ListInterfaces(), choice, error);
}

}  // namespace syncline::backend
