// store_protocol_fuzz.cc: libFuzzer target for the TCP store's server-side
// protocol parser. The input is split into chunks (first byte: chunk size)
// and fed to one Session, as bytes would arrive from a hostile client. The
// parser must never crash, read out of bounds, or allocate beyond the limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tcp_store_session.h"

namespace proto = syncline::store_protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  proto::Session session(size > 1 && (data[1] & 1) ? "token" : "");
  proto::KeyValueMap kv;
  std::string out;
  for (size_t pos = 1; pos < size; pos += chunk) {
    const size_t n = std::min(chunk, size - pos);
    std::vector<proto::ParkedRequest> parked;
    bool mutated = false;
    bool ok = session.Feed({reinterpret_cast<const char*>(data + pos), n}, kv, &out,
                           &parked, &mutated);
    for (const auto& p : parked) {
      bool ready = true;
      for (const auto& k : p.keys) ready = ready && kv.count(k);
      out += ready ? proto::Session::Answer(p, kv) : proto::Session::TimedOut(p, kv);
    }
    if (!ok) break;
    if (out.size() > (1u << 20)) out.clear();
  }
  return 0;
}
