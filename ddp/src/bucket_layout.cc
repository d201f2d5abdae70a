// bucket_layout.cc: bucket assignment by dtype/device and size.
#include "bucket_layout.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "syncline/ddp/error.h"

namespace syncline::ddp::internal {
namespace {

using Key = std::tuple<int, int, int>;  // dtype, device type, device index

Key KeyOf(const LayoutVar& v) {
  return {static_cast<int>(v.dtype), static_cast<int>(v.device.type()),
          static_cast<int>(v.device.index())};
}

[[noreturn]] void Invalid(const std::string& why) {
  throw Error(absl::StatusCode::kInternal,
              "syncline::ddp: invalid bucket layout from rank 0: " + why);
}

}  // namespace

BucketLayout ComputeBucketLayout(const std::vector<LayoutVar>& vars,
                                 const std::vector<size_t>& order,
                                 int64_t first_cap_bytes, int64_t cap_bytes) {
  struct Open {
    std::vector<size_t> vars;
    int64_t bytes = 0;
    int closed = 0;  // buckets already closed for this key
  };
  std::map<Key, Open> open;
  BucketLayout layout;
  for (size_t v : order) {
    Open& bucket = open[KeyOf(vars[v])];
    bucket.vars.push_back(v);
    bucket.bytes += vars[v].bytes;
    const int64_t cap = bucket.closed == 0 ? first_cap_bytes : cap_bytes;
    if (bucket.bytes >= cap) {
      layout.push_back(std::move(bucket.vars));
      bucket.vars.clear();
      bucket.bytes = 0;
      ++bucket.closed;
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.vars.empty()) layout.push_back(std::move(bucket.vars));
  }
  // Launch order: by when the bucket's first gradient is expected.
  std::vector<size_t> position(vars.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::stable_sort(layout.begin(), layout.end(),
                   [&](const std::vector<size_t>& a, const std::vector<size_t>& b) {
                     return position[a.front()] < position[b.front()];
                   });
  return layout;
}

std::vector<size_t> CompleteOrder(const std::vector<size_t>& partial, size_t num_vars) {
  std::vector<bool> seen(num_vars, false);
  std::vector<size_t> order;
  order.reserve(num_vars);
  for (size_t v : partial) {
    if (v < num_vars && !seen[v]) {
      seen[v] = true;
      order.push_back(v);
    }
  }
  for (size_t v = num_vars; v-- > 0;) {
    if (!seen[v]) order.push_back(v);
  }
  return order;
}

std::vector<int64_t> EncodeLayout(const BucketLayout& layout) {
  std::vector<int64_t> out = {static_cast<int64_t>(layout.size())};
  for (const auto& bucket : layout) {
    out.push_back(static_cast<int64_t>(bucket.size()));
    out.insert(out.end(), bucket.begin(), bucket.end());
  }
  return out;
}

BucketLayout DecodeLayout(const std::vector<int64_t>& encoded,
                          const std::vector<LayoutVar>& vars) {
  if (encoded.empty()) Invalid("empty");
  BucketLayout layout;
  std::vector<bool> seen(vars.size(), false);
  size_t pos = 1;
  for (int64_t b = 0; b < encoded[0]; ++b) {
    if (pos >= encoded.size()) Invalid("truncated");
    const int64_t n = encoded[pos++];
    if (n <= 0 || pos + n > encoded.size()) Invalid("bad bucket size");
    std::vector<size_t> bucket;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = encoded[pos++];
      if (v < 0 || v >= static_cast<int64_t>(vars.size()) || seen[v]) {
        Invalid("parameter " + std::to_string(v) +
                " is out of range or appears twice; do all ranks have the "
                "same parameters?");
      }
      seen[v] = true;
      if (!bucket.empty() && KeyOf(vars[v]) != KeyOf(vars[bucket.front()])) {
        Invalid("bucket " + std::to_string(b) + " mixes dtypes or devices");
      }
      bucket.push_back(static_cast<size_t>(v));
    }
    layout.push_back(std::move(bucket));
  }
  if (std::count(seen.begin(), seen.end(), true) != static_cast<int64_t>(vars.size())) {
    Invalid("some parameters are in no bucket");
  }
  return layout;
}

}  // namespace syncline::ddp::internal
