#include "backends/gloo/mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "gloo/transport/context.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/tcp/address.h"

namespace syncline::gloo_backend {
namespace {

using Clock = std::chrono::steady_clock;
namespace tcp = ::gloo::transport::tcp;

constexpr size_t kPackedV4 = 2 + 4;       // port, address
constexpr size_t kPackedV6 = 2 + 16 + 4;  // port, address, scope id
static_assert(kPackedV6 == kMaxPackedAddressBytes);

// Rank `from`'s pair address for rank `to`. The core scopes the key to the
// communicator.
std::string PairKey(int from, int to) {
  return "gloo/p/" + std::to_string(from) + "/" + std::to_string(to);
}

// Ports and addresses stay in network byte order, as in the sockaddr.
std::string PackAddress(const ::gloo::transport::Address& address) {
  const auto* tcp_address = dynamic_cast<const tcp::Address*>(&address);
  if (tcp_address == nullptr) throw std::logic_error("gloo pair address is not tcp");
  const sockaddr_storage& ss = tcp_address->getSockaddr();
  std::string packed;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    packed.append(reinterpret_cast<const char*>(&in->sin_port), 2);
    packed.append(reinterpret_cast<const char*>(&in->sin_addr), 4);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    packed.append(reinterpret_cast<const char*>(&in6->sin6_port), 2);
    packed.append(reinterpret_cast<const char*>(&in6->sin6_addr), 16);
    packed.append(reinterpret_cast<const char*>(&in6->sin6_scope_id), 4);
  } else {
    throw std::logic_error("gloo pair address of family " + std::to_string(ss.ss_family));
  }
  return packed;
}

// The pair address `packed` names, as Gloo's Pair::connect() takes it.
tcp::Address UnpackAddress(const std::vector<char>& packed, const std::string& what) {
  sockaddr_storage ss;
  std::memset(&ss, 0, sizeof(ss));
  if (packed.size() == kPackedV4) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_port, packed.data(), 2);
    std::memcpy(&in->sin_addr, packed.data() + 2, 4);
  } else if (packed.size() == kPackedV6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_port, packed.data(), 2);
    std::memcpy(&in6->sin6_addr, packed.data() + 2, 16);
    std::memcpy(&in6->sin6_scope_id, packed.data() + 18, 4);
  } else {
    throw StoreError(SL_ERR_INTERNAL, what + " holds " + std::to_string(packed.size()) +
                                          " bytes, not a packed address of " +
                                          std::to_string(kPackedV4) + " or " +
                                          std::to_string(kPackedV6));
  }
  return tcp::Address(ss);
}

// Milliseconds left until `deadline`; at least 1.
int64_t RemainingMs(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max<int64_t>(1, left.count());
}

void Put(const sl_store_t& store, const std::string& key, const std::string& value) {
  sl_error_t err;
  err.message[0] = '\0';
  const sl_result_t rc = store.set(store.ctx, key.c_str(), value.data(), value.size(), &err);
  if (rc != SL_OK) {
    throw StoreError(rc, "store set of key '" + key + "' failed: " + err.message);
  }
}

// Blocks until `key` exists or the deadline.
std::vector<char> Fetch(const sl_store_t& store, const std::string& key,
                        Clock::time_point deadline, const std::string& what) {
  sl_error_t err;
  err.message[0] = '\0';
  void* value = nullptr;
  size_t len = 0;
  const sl_result_t rc =
      store.get(store.ctx, key.c_str(), RemainingMs(deadline), &value, &len, &err);
  if (rc != SL_OK) throw StoreError(rc, what + " failed: " + err.message);
  const char* bytes = static_cast<const char*>(value);
  std::vector<char> result(bytes, bytes + len);
  if (value != nullptr) store.free_value(store.ctx, value);
  return result;
}

}  // namespace

std::vector<std::pair<std::string, int>> MeshContext::ConnectMesh(
    const sl_store_t& store, std::shared_ptr<::gloo::transport::Device> device,
    Clock::time_point deadline) {
  // As connectFullMesh does: every pair (each with its own listening
  // socket) exists and is published before any is connected, and pairs are
  // connected in rank order.
  auto transport_context = device->createContext(rank, size);
  transport_context->setTimeout(getTimeout());
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    auto& pair = transport_context->createPair(peer);
    Put(store, PairKey(rank, peer), PackAddress(pair->address()));
  }
  std::vector<std::pair<std::string, int>> peers;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::string key = PairKey(peer, rank);
    const std::string what =
        "waiting for rank " + std::to_string(peer) + "'s address (store key '" + key + "')";
    const tcp::Address address = UnpackAddress(Fetch(store, key, deadline, what), what);
    peers.emplace_back(address.str(), peer);
    transport_context->getPair(peer)->connect(address.bytes());
  }
  device_ = std::move(device);
  transportContext_ = std::move(transport_context);
  return peers;
}

}  // namespace syncline::gloo_backend
