// store_adapter.cc: C callbacks that forward to a Store.
#include "store_adapter.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"

namespace syncline::internal {
namespace {

sl_result_t Fail(const absl::Status& s, sl_error_t* err) {
  if (err != nullptr) std::snprintf(err->message, sizeof(err->message), "%s",
                                    std::string(s.message()).c_str());
  return ToResult(s);
}

sl_result_t CSet(void* ctx, const char* key, const void* value, size_t len,
                 sl_error_t* err) {
  absl::Status s = static_cast<Store*>(ctx)->Set(
      key, absl::string_view(static_cast<const char*>(value), len));
  return s.ok() ? SL_OK : Fail(s, err);
}

sl_result_t CGet(void* ctx, const char* key, int64_t timeout_ms, void** value,
                 size_t* len, sl_error_t* err) {
  auto v = static_cast<Store*>(ctx)->Get(
      key, timeout_ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(timeout_ms));
  if (!v.ok()) return Fail(v.status(), err);
  *len = v->size();
  *value = std::malloc(v->size() + 1);
  if (*value == nullptr) return Fail(absl::ResourceExhaustedError("out of memory"), err);
  std::memcpy(*value, v->data(), v->size());
  return SL_OK;
}

void CFree(void*, void* value) { std::free(value); }

sl_result_t CAdd(void* ctx, const char* key, int64_t delta, int64_t* result,
                 sl_error_t* err) {
  auto v = static_cast<Store*>(ctx)->Add(key, delta);
  if (!v.ok()) return Fail(v.status(), err);
  *result = *v;
  return SL_OK;
}

}  // namespace

sl_store_t MakeCStore(Store* store) {
  return sl_store_t{sizeof(sl_store_t), store, &CSet, &CGet, &CFree, &CAdd};
}

namespace {

// The one table behind both directions, as plugin_abi.h documents it.
struct CodePair {
  sl_result_t result;
  absl::StatusCode code;
};
constexpr CodePair kCodes[] = {
    {SL_OK, absl::StatusCode::kOk},
    {SL_ERR_INVALID_ARGUMENT, absl::StatusCode::kInvalidArgument},
    {SL_ERR_UNSUPPORTED, absl::StatusCode::kUnimplemented},
    {SL_ERR_TIMEOUT, absl::StatusCode::kDeadlineExceeded},
    {SL_ERR_PEER, absl::StatusCode::kUnavailable},
    {SL_ERR_INTERNAL, absl::StatusCode::kInternal},
    {SL_ERR_ABORTED, absl::StatusCode::kAborted},
    {SL_ERR_UNAVAILABLE, absl::StatusCode::kResourceExhausted},
    {SL_ERR_MISMATCH, absl::StatusCode::kFailedPrecondition},
};

}  // namespace

sl_result_t ToResult(const absl::Status& s) {
  for (const CodePair& pair : kCodes) {
    if (pair.code == s.code()) return pair.result;
  }
  return SL_ERR_INTERNAL;
}

absl::StatusCode ToStatusCode(sl_result_t r) {
  for (const CodePair& pair : kCodes) {
    if (pair.result == r) return pair.code;
  }
  return absl::StatusCode::kInternal;
}

}  // namespace syncline::internal
