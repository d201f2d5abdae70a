// tcp_store_protocol.h: the wire format of the TCP store.
//
// Connection: the client sends Hello{magic, version}; the server answers the
// same. Then frames: u32 body length (little endian), then the body.
// Request body: u8 command, then fields. Response body: u8 code, then fields.
// Fields: bytes as u32 length + data; integers as 8-byte little endian.
// All parsing is bounds-checked; a malformed frame is an error, never a crash.
#ifndef SYNCLINE_CORE_SRC_TCP_STORE_PROTOCOL_H_
#define SYNCLINE_CORE_SRC_TCP_STORE_PROTOCOL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace syncline::store_protocol {

enum class Command : uint8_t {
  kSet = 1, kGet = 2, kAdd = 3, kWait = 4, kCompareSet = 5,
  kDelete = 6, kNumKeys = 7, kCheck = 8,
};
enum class Code : uint8_t { kOk = 0, kError = 1, kTimeout = 2 };

inline constexpr size_t kHelloBytes = 8;
// Largest body the server accepts: two values (compare-set) plus keys.
size_t MaxFrameBytes();

std::string EncodeHello();
// True when `hello` (8 bytes) carries our magic and version.
bool DecodeHello(absl::string_view hello, uint32_t* magic, uint32_t* version);

// Appends fields to a body.
class Writer {
 public:
  explicit Writer(uint8_t first) { out_.push_back(static_cast<char>(first)); }
  Writer& Bytes(absl::string_view s);
  Writer& Int(int64_t v);
  Writer& U32(uint32_t v);
  // Returns length prefix + body.
  std::string Frame() const;

 private:
  std::string out_;
};

// Reads fields from a body; every call returns false on underrun or on a
// bytes field longer than `max_bytes`.
class Reader {
 public:
  explicit Reader(absl::string_view body) : in_(body) {}
  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool Int(int64_t* v);
  bool Bytes(std::string* s, size_t max_bytes);
  bool AtEnd() const { return in_.empty(); }

 private:
  absl::string_view in_;
};

uint32_t LoadU32(const char* p);

}  // namespace syncline::store_protocol

#endif  // SYNCLINE_CORE_SRC_TCP_STORE_PROTOCOL_H_
