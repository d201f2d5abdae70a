#include "backends/gloo/mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "gloo/common/error.h"
#include "gloo/transport/context.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/unbound_buffer.h"

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

// Gloo's I/O error `e` while `doing`, with the rank named and the code
// kept: a timeout, or a lost peer.
[[noreturn]] void Rethrow(const ::gloo::IoException& e, const std::string& doing,
                          const std::string& hint = "") {
  const std::string text = e.what();
  const bool timed_out = text.find("imed out") != std::string::npos ||
                         text.find("timeout") != std::string::npos;
  throw StoreError(timed_out ? SL_ERR_TIMEOUT : SL_ERR_PEER,
                   doing + " failed: " + text + hint);
}

// Whether Gloo's Pair::connect() dials on the side whose own address is
// `self` (else it listens): Gloo compares the IP addresses, then the ports
// as stored (network byte order), and the greater side dials.
bool Dials(const ::gloo::transport::Address& self, const tcp::Address& peer) {
  const auto& a = dynamic_cast<const tcp::Address&>(self).getSockaddr();
  const auto& b = peer.getSockaddr();
  int rv = 0;
  if (a.ss_family == AF_INET && b.ss_family == AF_INET) {
    const auto* sa = reinterpret_cast<const sockaddr_in*>(&a);
    const auto* sb = reinterpret_cast<const sockaddr_in*>(&b);
    rv = std::memcmp(&sa->sin_addr, &sb->sin_addr, sizeof(in_addr));
    if (rv == 0) rv = sa->sin_port - sb->sin_port;
  } else if (a.ss_family == AF_INET6 && b.ss_family == AF_INET6) {
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(&a);
    const auto* sb = reinterpret_cast<const sockaddr_in6*>(&b);
    rv = std::memcmp(&sa->sin6_addr, &sb->sin6_addr, sizeof(in6_addr));
    if (rv == 0) rv = sa->sin6_port - sb->sin6_port;
  }
  return rv > 0;
}

// The peers whose pair addresses go through the store: (rank +- 2^k) mod
// size, the partners of Bruck's all-to-all below.
std::set<int> StorePeers(int rank, int size) {
  std::set<int> peers;
  for (int64_t step = 1; step < size; step *= 2) {
    peers.insert(static_cast<int>((rank + step) % size));
    peers.insert(static_cast<int>((rank - step % size + size) % size));
  }
  peers.erase(rank);
  return peers;
}

// Bootstrap messages use a slot prefix no collective or point-to-point op
// uses (ops.cc: Gloo's collectives use small prefixes, point-to-point 0xf0),
// and all of them are received before comm_create returns.
constexpr uint64_t kBootstrapSlot = 0xe5ull << 56;
// A block of the all-to-all: a length byte, then a packed address.
constexpr size_t kBlockBytes = 1 + kMaxPackedAddressBytes;

// Bruck's all-to-all over the pairs to StorePeers(), which must be
// connected: `mine[j]` (this rank's pair address for rank j) reaches rank
// j, and the result holds at [i] rank i's pair address for this rank. In
// round s every rank sends to rank + 2^s the blocks whose distance has bit s
// set and receives as many from rank - 2^s: ceil(log2 N) rounds of about N/2
// blocks, instead of N - 1 store keys per rank.
std::vector<std::vector<char>> AllToAll(::gloo::transport::Context& context,
                                        const std::vector<std::string>& mine,
                                        Clock::time_point deadline) {
  const int rank = context.rank;
  const int size = context.size;
  // blocks[k]: the block travelling to (origin + k), origin = rank - hops.
  std::vector<char> blocks(static_cast<size_t>(size) * kBlockBytes, 0);
  for (int k = 1; k < size; ++k) {
    const std::string& packed = mine[(rank + k) % size];
    char* block = blocks.data() + static_cast<size_t>(k) * kBlockBytes;
    block[0] = static_cast<char>(packed.size());
    std::memcpy(block + 1, packed.data(), packed.size());
  }
  for (int s = 0; (int64_t{1} << s) < size; ++s) {
    const int step = 1 << s;
    std::vector<int> moved;
    for (int k = 1; k < size; ++k) {
      if (k & step) moved.push_back(k);
    }
    std::vector<char> out(moved.size() * kBlockBytes), in(moved.size() * kBlockBytes);
    for (size_t m = 0; m < moved.size(); ++m) {
      std::memcpy(out.data() + m * kBlockBytes,
                  blocks.data() + static_cast<size_t>(moved[m]) * kBlockBytes, kBlockBytes);
    }
    auto send = context.createUnboundBuffer(out.data(), out.size());
    auto recv = context.createUnboundBuffer(in.data(), in.size());
    const uint64_t slot = kBootstrapSlot | static_cast<uint64_t>(s);
    const int from = (rank - step % size + size) % size;
    const int to = (rank + step) % size;
    try {
      recv->recv(from, slot);
      send->send(to, slot);
      // Gloo throws on a timeout or a lost peer; false means aborted.
      if (!recv->waitRecv(std::chrono::milliseconds(RemainingMs(deadline))) ||
          !send->waitSend(std::chrono::milliseconds(RemainingMs(deadline)))) {
        throw StoreError(SL_ERR_ABORTED, "the bootstrap all-to-all was aborted");
      }
    } catch (const ::gloo::IoException& e) {
      Rethrow(e, "exchanging pair addresses with rank " + std::to_string(from) +
                     " and rank " + std::to_string(to) + " (round " + std::to_string(s) +
                     " of the bootstrap all-to-all)",
              ". A rank that fails or stalls in its bootstrap stalls the whole "
              "exchange; the ranks next to it in the exchange name it");
    }
    for (size_t m = 0; m < moved.size(); ++m) {
      std::memcpy(blocks.data() + static_cast<size_t>(moved[m]) * kBlockBytes,
                  in.data() + m * kBlockBytes, kBlockBytes);
    }
  }
  // blocks[k] now came from rank - k, for this rank.
  std::vector<std::vector<char>> theirs(size);
  for (int k = 1; k < size; ++k) {
    const char* block = blocks.data() + static_cast<size_t>(k) * kBlockBytes;
    const size_t len = std::min<size_t>(static_cast<unsigned char>(block[0]),
                                        kMaxPackedAddressBytes);
    theirs[(rank - k + size) % size].assign(block + 1, block + 1 + len);
  }
  return theirs;
}

}  // namespace

std::vector<std::pair<std::string, int>> MeshContext::ConnectMesh(
    const sl_store_t& store, std::shared_ptr<::gloo::transport::Device> device,
    Clock::time_point deadline) {
  // Every pair (each with its own listening socket) exists before any
  // address is published, as in connectFullMesh, so a peer that connects
  // early waits in that socket's backlog. Within each phase pairs are
  // connected in rank order; a rank waits only on peers that are connecting
  // to it in the same phase, so no cycle of waits can form.
  auto transport_context = device->createContext(rank, size);
  // A listening pair waits up to 5x its own timeout for its peer to dial
  // (Pair::waitUntilConnected); made with a fifth of the bootstrap timeout,
  // it waits no longer than that timeout. Pairs use their timeout for
  // nothing else here (their sockets are non-blocking; ops pass their own
  // deadlines), and the context keeps the whole timeout as its default.
  transport_context->setTimeout(
      std::max(std::chrono::milliseconds(1), getTimeout() / 5));
  std::vector<std::string> mine(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    mine[peer] = PackAddress(transport_context->createPair(peer)->address());
  }
  transport_context->setTimeout(getTimeout());
  std::vector<std::pair<std::string, int>> names;
  // Connects the pairs to `peers` (rank, packed address for this rank).
  // Gloo's connect() returns at once on the side that dials (the peer's
  // listening socket already exists) but blocks on the side that listens
  // until the peer dials, for up to the context's timeout. So every pair
  // this rank dials goes first, and only then does it wait for those it
  // listens on: a rank never waits on a peer that is itself waiting, and a
  // rank that failed costs its peers one timeout, not one per pair in a
  // chain of waits.
  auto connect_all = [&](const std::vector<std::pair<int, std::vector<char>>>& peers,
                         const std::string& source) {
    std::vector<std::pair<int, tcp::Address>> dial, listen;
    for (const auto& [peer, packed] : peers) {
      const std::string what = "rank " + std::to_string(peer) + "'s address (" + source + ")";
      tcp::Address address = UnpackAddress(packed, what);
      names.emplace_back(address.str(), peer);
      const bool dials = Dials(transport_context->getPair(peer)->address(), address);
      (dials ? dial : listen).emplace_back(peer, std::move(address));
    }
    for (auto* group : {&dial, &listen}) {
      for (const auto& [peer, address] : *group) {
        try {
          transport_context->getPair(peer)->connect(address.bytes());
        } catch (const ::gloo::IoException& e) {
          Rethrow(e, "connecting the pair to rank " + std::to_string(peer) + " (" +
                         address.str() + ")");
        }
      }
    }
  };
  // 1. The pairs to (rank +- 2^k), through the store: O(log N) keys a rank.
  const std::set<int> store_peers = StorePeers(rank, size);
  for (int peer : store_peers) Put(store, PairKey(rank, peer), mine[peer]);
  std::vector<std::pair<int, std::vector<char>>> first;
  for (int peer : store_peers) {
    const std::string key = PairKey(peer, rank);
    first.emplace_back(peer, Fetch(store, key, deadline,
                                   "waiting for rank " + std::to_string(peer) +
                                       "'s address (store key '" + key + "')"));
  }
  connect_all(first, "store");
  // 2. Every other pair's address, over those pairs; then those pairs.
  if (static_cast<int>(store_peers.size()) < size - 1) {
    std::vector<std::vector<char>> theirs = AllToAll(*transport_context, mine, deadline);
    std::vector<std::pair<int, std::vector<char>>> rest;
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank && !store_peers.count(peer)) rest.emplace_back(peer, std::move(theirs[peer]));
    }
    connect_all(rest, "bootstrap all-to-all");
  }
  device_ = std::move(device);
  transportContext_ = std::move(transport_context);
  return names;
}

}  // namespace syncline::gloo_backend
