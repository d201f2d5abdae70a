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
  return sl_store_t{store, &CSet, &CGet, &CFree, &CAdd};
}

sl_result_t ToResult(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk: return SL_OK;
    case absl::StatusCode::kInvalidArgument: return SL_ERR_INVALID_ARGUMENT;
    case absl::StatusCode::kUnimplemented: return SL_ERR_UNSUPPORTED;
    case absl::StatusCode::kDeadlineExceeded: return SL_ERR_TIMEOUT;
    case absl::StatusCode::kAborted: return SL_ERR_ABORTED;
    case absl::StatusCode::kUnavailable: return SL_ERR_PEER;
    case absl::StatusCode::kFailedPrecondition: return SL_ERR_MISMATCH;
    default: return SL_ERR_INTERNAL;
  }
}

absl::StatusCode ToStatusCode(sl_result_t r) {
  switch (r) {
    case SL_OK: return absl::StatusCode::kOk;
    case SL_ERR_INVALID_ARGUMENT: return absl::StatusCode::kInvalidArgument;
    case SL_ERR_UNSUPPORTED: return absl::StatusCode::kUnimplemented;
    case SL_ERR_TIMEOUT: return absl::StatusCode::kDeadlineExceeded;
    case SL_ERR_PEER: return absl::StatusCode::kUnavailable;
    case SL_ERR_ABORTED: return absl::StatusCode::kAborted;
    case SL_ERR_UNAVAILABLE: return absl::StatusCode::kUnavailable;
    case SL_ERR_MISMATCH: return absl::StatusCode::kFailedPrecondition;
    default: return absl::StatusCode::kInternal;
  }
}

}  // namespace syncline::internal
