#include "backends/ucx/bootstrap.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace syncline::ucx_backend {
namespace {

constexpr char kMagic[] = "slucx1";

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::set<std::string> SplitCommas(const std::string& text) {
  std::set<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) items.insert(item);
  }
  return items;
}

void AppendString(std::string* out, const std::string& s) {
  const uint32_t len = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&len), sizeof(len));
  out->append(s);
}

bool ReadString(const std::string& in, size_t* pos, std::string* s) {
  uint32_t len = 0;
  if (*pos + sizeof(len) > in.size()) return false;
  std::memcpy(&len, in.data() + *pos, sizeof(len));
  *pos += sizeof(len);
  if (*pos + len > in.size()) return false;
  s->assign(in, *pos, len);
  *pos += len;
  return true;
}

}  // namespace

std::string PeerInfo::Serialize() const {
  std::string out(kMagic);
  out.append(reinterpret_cast<const char*>(&pid), sizeof(pid));
  AppendString(&out, host);
  AppendString(&out, machine);
  AppendString(&out, address);
  return out;
}

bool PeerInfo::Parse(const std::string& bytes, PeerInfo* info) {
  const size_t magic = sizeof(kMagic) - 1;
  if (bytes.compare(0, magic, kMagic) != 0) return false;
  size_t pos = magic;
  if (pos + sizeof(info->pid) > bytes.size()) return false;
  std::memcpy(&info->pid, bytes.data() + pos, sizeof(info->pid));
  pos += sizeof(info->pid);
  return ReadString(bytes, &pos, &info->host) && ReadString(bytes, &pos, &info->machine) &&
         ReadString(bytes, &pos, &info->address);
}

PeerInfo LocalPeerInfo(const std::string& worker_address) {
  PeerInfo info;
  info.pid = static_cast<int32_t>(getpid());
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  info.host = host;
  struct stat ns {};
  const bool have_ns = stat("/proc/self/ns/pid", &ns) == 0;
  info.machine = ReadFirstLine("/proc/sys/kernel/random/boot_id") + "/" +
                 (have_ns ? std::to_string(ns.st_ino) : std::string("?"));
  info.address = worker_address;
  return info;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string PeerKey(int rank) { return "ucx/peer/" + std::to_string(rank); }

int64_t MillisLeft(Clock::time_point deadline) {
  return std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
             .count());
}

sl_result_t Add(const sl_store_t& store, const std::string& key, int64_t delta,
                int64_t* value, std::string* error) {
  sl_error_t err{};
  const sl_result_t code = store.add(store.ctx, key.c_str(), delta, value, &err);
  if (code != SL_OK) *error = "store add of '" + key + "' failed: " + err.message;
  return code;
}

// The ranks whose record is not in the store, as "3,5-9" (a scan with
// non-blocking reads: only on the failure path).
std::string MissingPeers(const sl_store_t& store, int size) {
  std::string out;
  int first = -1;
  auto close_range = [&](int last) {
    if (first < 0) return;
    out += (out.empty() ? "" : ",") + std::to_string(first) +
           (last > first ? "-" + std::to_string(last) : "");
    first = -1;
  };
  for (int r = 0; r < size; ++r) {
    sl_error_t err{};
    void* bytes = nullptr;
    size_t len = 0;
    const bool present =
        store.get(store.ctx, PeerKey(r).c_str(), 1, &bytes, &len, &err) == SL_OK;
    if (present) {
      store.free_value(store.ctx, bytes);
      close_range(r - 1);
    } else if (first < 0) {
      first = r;
    }
  }
  close_range(size - 1);
  return out;
}

}  // namespace

sl_result_t PublishPeerInfo(const sl_store_t& store, int rank, int size,
                            const PeerInfo& mine, Clock::time_point deadline,
                            int* ranks_on_host, std::string* error) {
  const auto start = Clock::now();
  sl_error_t err{};
  const std::string value = mine.Serialize();
  if (store.set(store.ctx, PeerKey(rank).c_str(), value.data(), value.size(), &err) !=
      SL_OK) {
    *error = std::string("publishing this rank's UCX address in the store failed: ") +
             err.message;
    return SL_ERR_UNAVAILABLE;
  }
  const std::string host_key = "ucx/host/" + mine.machine;
  int64_t arrived = 0, on_host = 0;
  sl_result_t code = Add(store, host_key, 1, &on_host, error);
  if (code == SL_OK) code = Add(store, "ucx/published", 1, &arrived, error);
  if (code != SL_OK) return code;
  if (arrived == size &&
      store.set(store.ctx, "ucx/all_published", "1", 1, &err) != SL_OK) {
    *error = std::string("announcing that every rank published failed: ") + err.message;
    return SL_ERR_UNAVAILABLE;
  }
  void* bytes = nullptr;
  size_t len = 0;
  code = store.get(store.ctx, "ucx/all_published", MillisLeft(deadline), &bytes, &len, &err);
  if (code != SL_OK) {
    char waited[64];
    std::snprintf(waited, sizeof(waited), "%.1f s",
                  std::chrono::duration<double>(Clock::now() - start).count());
    *error = "ranks [" + MissingPeers(store, size) +
             "] never published their UCX worker address (waited " + waited +
             "; they did not start, crashed, or use a different store): " + err.message;
    return code == SL_ERR_TIMEOUT ? SL_ERR_TIMEOUT : code;
  }
  store.free_value(store.ctx, bytes);
  // Everyone has counted itself by now: the host's count is final.
  code = Add(store, host_key, 0, &on_host, error);
  *ranks_on_host = static_cast<int>(on_host);
  return code;
}

sl_result_t FetchPeerInfo(const sl_store_t& store, int peer, Clock::time_point deadline,
                          PeerInfo* info, std::string* error) {
  sl_error_t err{};
  void* bytes = nullptr;
  size_t len = 0;
  const sl_result_t code =
      store.get(store.ctx, PeerKey(peer).c_str(), MillisLeft(deadline), &bytes, &len, &err);
  if (code != SL_OK) {
    *error = "reading rank " + std::to_string(peer) +
             "'s UCX worker address from the store failed: " + err.message;
    return code;
  }
  std::string text(static_cast<const char*>(bytes), len);
  store.free_value(store.ctx, bytes);
  if (!PeerInfo::Parse(text, info)) {
    *error = "rank " + std::to_string(peer) +
             " published an unreadable UCX address (a different Syncline version?)";
    return SL_ERR_MISMATCH;
  }
  return SL_OK;
}

bool TlsAllowsSharedMemory() {
  std::string tls = Env("UCX_TLS");
  if (tls.empty()) return true;
  const bool negate = tls[0] == '^';
  if (negate) tls.erase(0, 1);
  const std::set<std::string> items = SplitCommas(tls);
  bool listed = false;
  for (const char* shm : {"all", "sm", "shm", "posix", "sysv", "mm", "xpmem", "knem"}) {
    listed = listed || items.count(shm) > 0;
  }
  return negate ? !(items.count("sm") || items.count("shm") || items.count("mm")) : listed;
}

ucp_err_handling_mode_t ChooseErrorMode(PeerErrorMode mode, bool same_machine) {
  switch (mode) {
    case PeerErrorMode::kPeer:
      return UCP_ERR_HANDLING_MODE_PEER;
    case PeerErrorMode::kNone:
      return UCP_ERR_HANDLING_MODE_NONE;
    case PeerErrorMode::kAuto:
    default:
      return same_machine && TlsAllowsSharedMemory() ? UCP_ERR_HANDLING_MODE_NONE
                                                     : UCP_ERR_HANDLING_MODE_PEER;
  }
}

std::string ReachabilityHint(const PeerInfo& me, const PeerInfo& peer, int peer_rank,
                             ucp_err_handling_mode_t mode) {
  const std::string tls = Env("UCX_TLS"), devices = Env("UCX_NET_DEVICES");
  const bool same_host = me.machine == peer.machine;
  std::string hint = "UCX has no transport from host " + me.host + " to rank " +
                     std::to_string(peer_rank) + " on host " + peer.host + " (UCX_TLS=" +
                     (tls.empty() ? "<unset: all>" : tls) + ", UCX_NET_DEVICES=" +
                     (devices.empty() ? "<unset: all>" : devices) + ").";
  const std::set<std::string> tl = SplitCommas(tls);
  const std::set<std::string> dev = SplitCommas(devices);
  if (!same_host && !devices.empty() && dev.size() == (dev.count("lo") + dev.count("lo:0")) &&
      !dev.empty()) {
    hint += " UCX_NET_DEVICES lists only loopback devices, which cannot reach another "
            "host: name a real interface (e.g. eth0 or mlx5_0:1) or unset it.";
  }
  bool shm_only = !tl.empty() && tls[0] != '^';
  for (const auto& t : tl) {
    shm_only = shm_only && (t == "posix" || t == "sysv" || t == "sm" || t == "shm" ||
                            t == "cma" || t == "self" || t == "mm" || t == "xpmem" ||
                            t == "knem");
  }
  if (!same_host && shm_only) {
    hint += " Shared-memory transports only work within one host: add tcp (or rc,ud for "
            "InfiniBand), e.g. UCX_TLS=sm,self,tcp.";
  }
  if ((tl.count("rc") || tl.count("rc_v") || tl.count("rc_x")) && !tl.count("ud") &&
      !tl.count("ud_v") && !tl.count("ud_x") && !tl.count("tcp")) {
    hint += " rc without ud: UCX needs ud (or tcp) to wire up rc connections; use "
            "UCX_TLS=rc,ud,sm,self.";
  }
  if (same_host && mode == UCP_ERR_HANDLING_MODE_PEER && shm_only) {
    hint += " peer_error_mode=peer excludes UCX 1.13's shared-memory transports (no "
            "peer-failure support); use peer_error_mode=auto or add tcp.";
  }
  if (tls.find("tcp") != std::string::npos || tls.empty()) {
    hint += " For tcp, check that the peer's interfaces are up and routable from here.";
  }
  return hint;
}

std::string EndpointTransports(ucp_ep_h ep) {
  char* text = nullptr;
  size_t len = 0;
  FILE* stream = open_memstream(&text, &len);
  if (stream == nullptr) return "?";
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  std::string info(text, len);
  std::free(text);
  // Lines look like "#   lane[0]:  2:posix/memory.0 md[2] ..."; keep tl names.
  std::set<std::string> names;
  size_t pos = 0;
  while ((pos = info.find("lane[", pos)) != std::string::npos) {
    const size_t colon = info.find(':', info.find(']', pos) + 1);
    if (colon == std::string::npos) break;
    size_t begin = info.find(':', colon + 1);
    if (begin == std::string::npos) break;
    ++begin;
    const size_t end = info.find_first_of(" .\n", begin);
    names.insert(info.substr(begin, end - begin));
    pos = begin;
  }
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : " ") + name;
  return out.empty() ? "?" : out;
}

}  // namespace syncline::ucx_backend
