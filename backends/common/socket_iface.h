// socket_iface.h: which local address a TCP transport should listen on.
//
// The rules, shared by every backend that opens sockets:
//  - SYNCLINE_SOCKET_IFNAME (else the transport's own variable, e.g.
//    GLOO_SOCKET_IFNAME) selects interfaces with NCCL's syntax: a comma list
//    of name prefixes ("eth,ib"), "=" for exact names ("=eth0"), and "^" to
//    exclude ("^lo,docker"). The first IPv4 interface that matches wins.
//  - Otherwise a job whose store is on loopback stays on 127.0.0.1, and any
//    other job uses the local address of the route to the master (found by
//    connecting a UDP socket, which sends nothing).
//  - A multi-host job never silently binds to loopback: that is an error
//    that says what to set.
// Transport-free: only libc.
#ifndef SYNCLINE_BACKENDS_COMMON_SOCKET_IFACE_H_
#define SYNCLINE_BACKENDS_COMMON_SOCKET_IFACE_H_

#include <string>
#include <vector>

namespace syncline::backend {

struct LocalInterface {
  std::string name;
  std::string address;  // dotted IPv4
  bool loopback = false;
};

// IPv4 interfaces that are up, in the kernel's order.
std::vector<LocalInterface> ListInterfaces();

// Whether interface `name` is selected by `spec` (NCCL syntax, see above).
bool InterfaceMatches(const std::string& spec, const std::string& name);

struct SocketChoice {
  std::string address;  // to bind / advertise
  std::string iface;    // interface name, when known
  std::string reason;   // how it was chosen, for logs and errors
};

// Picks the address. `spec` may be empty; `master` is MASTER_ADDR (may be
// empty); `multi_host` says whether peers live on other hosts. Returns false
// with *error set when the rules above cannot be met.
bool ChooseSocketAddress(const std::string& spec, const std::string& master,
                         bool multi_host, const std::vector<LocalInterface>& interfaces,
                         SocketChoice* choice, std::string* error);

// The environment's view: spec from SYNCLINE_SOCKET_IFNAME or
// `transport_var`, master from SYNCLINE_MASTER_ADDR/MASTER_ADDR, multi_host
// when the master is not a loopback address (ranks that all reached a
// loopback store share this host, however many "nodes" they form).
bool ChooseSocketAddressFromEnv(const char* transport_var, int world_size,
                                SocketChoice* choice, std::string* error);

}  // namespace syncline::backend

#endif  // SYNCLINE_BACKENDS_COMMON_SOCKET_IFACE_H_
