// tcp_store_protocol.cc: encoding and bounds-checked decoding.
#include "tcp_store_protocol.h"

#include <cstring>

#include "syncline/tcp_store.h"

namespace syncline::store_protocol {
namespace {

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

}  // namespace

size_t MaxFrameBytes() { return 2 * kStoreMaxValueBytes + 2 * kStoreMaxKeyBytes + 64; }

std::string EncodeHello() {
  std::string out;
  PutLe(out, kStoreMagic, 4);
  PutLe(out, kStoreProtocolVersion, 4);
  return out;
}

bool DecodeHello(absl::string_view hello, uint32_t* magic, uint32_t* version) {
  if (hello.size() < kHelloBytes) return false;
  *magic = static_cast<uint32_t>(GetLe(hello.data(), 4));
  *version = static_cast<uint32_t>(GetLe(hello.data() + 4, 4));
  return *magic == kStoreMagic && *version == kStoreProtocolVersion;
}

uint32_t LoadU32(const char* p) { return static_cast<uint32_t>(GetLe(p, 4)); }

Writer& Writer::Bytes(absl::string_view s) {
  PutLe(out_, s.size(), 4);
  out_.append(s.data(), s.size());
  return *this;
}
Writer& Writer::Int(int64_t v) {
  PutLe(out_, static_cast<uint64_t>(v), 8);
  return *this;
}
Writer& Writer::U32(uint32_t v) {
  PutLe(out_, v, 4);
  return *this;
}
std::string Writer::Frame() const {
  std::string frame;
  PutLe(frame, out_.size(), 4);
  frame += out_;
  return frame;
}

bool Reader::U8(uint8_t* v) {
  if (in_.size() < 1) return false;
  *v = static_cast<uint8_t>(in_[0]);
  in_.remove_prefix(1);
  return true;
}
bool Reader::U32(uint32_t* v) {
  if (in_.size() < 4) return false;
  *v = static_cast<uint32_t>(GetLe(in_.data(), 4));
  in_.remove_prefix(4);
  return true;
}
bool Reader::Int(int64_t* v) {
  if (in_.size() < 8) return false;
  *v = static_cast<int64_t>(GetLe(in_.data(), 8));
  in_.remove_prefix(8);
  return true;
}
bool Reader::Bytes(std::string* s, size_t max_bytes) {
  uint32_t len;
  if (!U32(&len) || len > max_bytes || len > in_.size()) return false;
  s->assign(in_.data(), len);
  in_.remove_prefix(len);
  return true;
}

}  // namespace syncline::store_protocol
