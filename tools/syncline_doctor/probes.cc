// probes.cc: versions through dlopen, interfaces through getifaddrs.
#include "probes.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "syncline/env.h"
#include "syncline/tcp_store.h"

extern char** environ;

namespace syncline::doctor {
namespace {

// Opens the first library that loads; the handle is kept (tools exit soon).
void* OpenAny(std::initializer_list<const char*> names, std::string* error) {
  for (const char* n : names) {
    if (void* h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = ::dlerror();
    *error = e ? e : "not found";
  }
  return nullptr;
}

}  // namespace

// Only libraries no backend stands for: a backend's transport (Gloo, UCX,
// NCCL, or a plugin's from outside the tree) is reported by the backend
// itself, in its table's version string, or named by the loader as the
// missing dependency when it does not load (ProbeBackends), so a new
// backend needs no probe here.
LibraryProbe ProbeCudaRuntime() {
  LibraryProbe p;
  p.name = "CUDA runtime";
  std::string err;
  void* h = OpenAny({"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                     "/usr/local/cuda/lib64/libcudart.so"}, &err);
  auto ver = h ? reinterpret_cast<int (*)(int*)>(::dlsym(h, "cudaRuntimeGetVersion")) : nullptr;
  auto count = h ? reinterpret_cast<int (*)(int*)>(::dlsym(h, "cudaGetDeviceCount")) : nullptr;
  int v = 0, devices = 0;
  p.found = ver != nullptr && ver(&v) == 0;
  if (p.found) {
    int rc = count ? count(&devices) : -1;
    p.version = absl::StrCat(v / 1000, ".", (v % 1000) / 10, ", GPUs visible: ",
                             rc == 0 ? absl::StrCat(devices)
                                     : absl::StrCat("none (cudaGetDeviceCount error ", rc, ")"));
  } else {
    p.version = err;
  }
  return p;
}

LibraryProbe ProbeLibtorch() {
  LibraryProbe p;
  p.name = "libtorch";
  std::string err;
  void* h = OpenAny({"libtorch_cpu.so", "libtorch.so"}, &err);
  p.found = h != nullptr;
  p.version = p.found ? "libtorch_cpu.so loads" : err;
  return p;
}

std::vector<Interface> ProbeInterfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    out.push_back({i->ifa_name, buf, (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return out;
}

std::string RouteTo(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0) {
    return absl::StrCat("cannot resolve ", host);
  }
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  std::string result;
  if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf));
    result = buf;
  } else {
    result = absl::StrCat("no route to ", host, ": ", std::strerror(errno));
  }
  ::close(fd);
  ::freeaddrinfo(res);
  return result;
}

std::vector<std::pair<std::string, std::string>> RelevantEnvironment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string s = *e;
    size_t eq = s.find('=');
    std::string name = s.substr(0, eq);
    for (const char* prefix : {"SYNCLINE_", "NCCL_", "UCX_", "GLOO_", "MASTER_", "OMP_"}) {
      if (absl::StartsWith(name, prefix)) out.emplace_back(name, s.substr(eq + 1));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ProbeStore(const std::string& host, int port) {
  auto store = ConnectTcpStore({.host = host, .port = port,
                                .connect_timeout = absl::Seconds(2),
                                .token = EnvString("SYNCLINE_STORE_TOKEN")});
  return store.ok() ? "a Syncline store answers" : std::string(store.status().message());
}

}  // namespace syncline::doctor
