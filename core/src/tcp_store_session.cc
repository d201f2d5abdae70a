// tcp_store_session.cc: request parsing and handling for one connection.
#include "tcp_store_session.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "syncline/tcp_store.h"

namespace syncline::store_protocol {
namespace {

Writer Ok() { return Writer(static_cast<uint8_t>(Code::kOk)); }
Writer Err() { return Writer(static_cast<uint8_t>(Code::kError)); }

// Compares without an early exit, so timing does not leak the token.
bool SameToken(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace

bool Session::Greet(std::string* out) {
  if (in_.size() < kHelloBytes + 4) return true;  // need more
  uint32_t magic = 0, version = 0;
  if (!DecodeHello(in_, &magic, &version)) {
    return Fail(absl::StrFormat("bad handshake (magic 0x%08x version %u)", magic, version));
  }
  uint32_t token_len = LoadU32(in_.data() + kHelloBytes);
  if (token_len > kMaxTokenBytes) {
    return Fail(absl::StrCat("handshake token of ", token_len, " bytes"));
  }
  if (in_.size() < kHelloBytes + 4 + token_len) return true;
  absl::string_view token(in_.data() + kHelloBytes + 4, token_len);
  bool accepted = token_.empty() || SameToken(token, token_);
  *out += EncodeHello();
  out->push_back(accepted ? 0 : 1);
  if (!accepted) {
    return Fail("wrong or missing SYNCLINE_STORE_TOKEN");
  }
  in_.erase(0, kHelloBytes + 4 + token_len);
  greeted_ = true;
  return true;
}

bool Session::Feed(absl::string_view bytes, KeyValueMap& data, std::string* out,
                   std::vector<ParkedRequest>* parked, bool* mutated) {
  in_.append(bytes.data(), bytes.size());
  if (!greeted_) {
    if (!Greet(out)) return false;
    if (!greeted_) return true;
  }
  while (in_.size() >= 4) {
    uint32_t len = LoadU32(in_.data());
    if (len == 0 || len > MaxFrameBytes()) {
      *out += Err().Bytes("frame exceeds the store's size limit").Frame();
      return Fail(absl::StrCat("frame of ", len, " bytes (limit ", MaxFrameBytes(), ")"));
    }
    if (in_.size() < 4 + size_t{len}) return true;
    std::string body = in_.substr(4, len);
    in_.erase(0, 4 + size_t{len});
    if (!Handle(body, data, out, parked, mutated)) return Fail("malformed request");
  }
  return true;
}

bool Session::Handle(absl::string_view body, KeyValueMap& data, std::string* out,
                     std::vector<ParkedRequest>* parked, bool* mutated) {
  Reader r(body);
  uint8_t cmd;
  if (!r.U8(&cmd)) return false;
  std::string key, a, b;
  int64_t num = 0;
  switch (static_cast<Command>(cmd)) {
    case Command::kSet:
      if (!r.Bytes(&key, kStoreMaxKeyBytes) || !r.Bytes(&a, kStoreMaxValueBytes)) return false;
      if (!Charge(data, key, a.size(), out)) return true;
      data[key] = std::move(a);
      written_.push_back(key);
      *mutated = true;
      *out += Ok().Frame();
      return true;
    case Command::kGet:
      if (!r.Bytes(&key, kStoreMaxKeyBytes) || !r.Int(&num)) return false;
      parked->push_back({Command::kGet, {key}, num});
      return true;
    case Command::kAdd: {
      if (!r.Bytes(&key, kStoreMaxKeyBytes) || !r.Int(&num)) return false;
      int64_t value = 0;
      auto it = data.find(key);
      if (it != data.end() && !absl::SimpleAtoi(it->second, &value)) {
        *out += Err().Bytes(absl::StrCat("key '", key, "' is not an integer")).Frame();
        return true;
      }
      value += num;
      std::string text = absl::StrCat(value);
      if (!Charge(data, key, text.size(), out)) return true;
      data[key] = std::move(text);
      written_.push_back(key);
      *mutated = true;
      *out += Ok().Int(value).Frame();
      return true;
    }
    case Command::kWait: {
      uint32_t n;
      if (!r.U32(&n) || n > kStoreMaxKeysPerWait) return false;
      std::vector<std::string> keys(n);
      for (auto& k : keys) {
        if (!r.Bytes(&k, kStoreMaxKeyBytes)) return false;
      }
      if (!r.Int(&num)) return false;
      parked->push_back({Command::kWait, std::move(keys), num});
      return true;
    }
    case Command::kCompareSet: {
      if (!r.Bytes(&key, kStoreMaxKeyBytes) || !r.Bytes(&a, kStoreMaxValueBytes) ||
          !r.Bytes(&b, kStoreMaxValueBytes)) {
        return false;
      }
      auto it = data.find(key);
      if ((it == data.end() && a.empty()) || (it != data.end() && it->second == a)) {
        if (!Charge(data, key, b.size(), out)) return true;
        data[key] = b;
        written_.push_back(key);
        *mutated = true;
        *out += Ok().Bytes(b).Frame();
      } else {
        *out += Ok().Bytes(it == data.end() ? std::string() : it->second).Frame();
      }
      return true;
    }
    case Command::kDelete:
      if (!r.Bytes(&key, kStoreMaxKeyBytes)) return false;
      if (quota_ != nullptr && data.count(key)) {
        quota_->used_bytes -= key.size() + data.at(key).size();
      }
      *out += Ok().Int(data.erase(key) > 0 ? 1 : 0).Frame();
      return true;
    case Command::kNumKeys:
      *out += Ok().Int(static_cast<int64_t>(data.size())).Frame();
      return true;
    case Command::kCheck: {
      uint32_t n;
      if (!r.U32(&n) || n > kStoreMaxKeysPerWait) return false;
      Writer w = Ok();
      w.U32(n);
      for (uint32_t i = 0; i < n; ++i) {
        if (!r.Bytes(&key, kStoreMaxKeyBytes)) return false;
        w.Int(data.count(key) ? 1 : 0);
      }
      *out += w.Frame();
      return true;
    }
  }
  return false;
}

bool Session::Charge(const KeyValueMap& data, const std::string& key, size_t value_bytes,
                     std::string* out) {
  if (quota_ == nullptr) return true;
  auto it = data.find(key);
  size_t old_bytes = it == data.end() ? 0 : key.size() + it->second.size();
  size_t used = quota_->used_bytes - old_bytes + key.size() + value_bytes;
  if (used > quota_->max_bytes) {
    *out +=
        Err()
            .Bytes(absl::StrCat("store quota exceeded: writing key '", key.substr(0, 200),
                                "' would hold ", used,
                                " bytes of keys and values, over the ", quota_->max_bytes,
                                "-byte limit (SYNCLINE_STORE_MAX_BYTES where the store "
                                "runs, TcpStoreServerOptions::max_store_bytes); delete "
                                "keys or raise the limit"))
            .Frame();
    return false;
  }
  quota_->used_bytes = used;
  return true;
}

std::string Session::Answer(const ParkedRequest& request, const KeyValueMap& data) {
  Writer w = Ok();
  if (request.command == Command::kGet) w.Bytes(data.at(request.keys[0]));
  return w.Frame();
}

std::string Session::TimedOut(const ParkedRequest& request, const KeyValueMap& data) {
  std::vector<std::string> missing;
  for (const auto& k : request.keys) {
    if (!data.count(k)) missing.push_back(k);
  }
  return Writer(static_cast<uint8_t>(Code::kTimeout)).Bytes(absl::StrJoin(missing, "\n")).Frame();
}

}  // namespace syncline::store_protocol
