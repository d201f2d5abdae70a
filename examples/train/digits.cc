// digits.cc: reading and splitting the digits CSV.
#include "digits.h"

#include <ATen/ops/from_blob.h>
#include <ATen/ops/tensor.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "syncline/ddp/seed.h"

namespace syncline::train {
namespace {

constexpr int kPixels = 64;
constexpr int kMaxPixel = 16;
constexpr int kClasses = 10;

// RAII for the gzFile handle.
struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

}  // namespace

absl::StatusOr<Digits> LoadDigits(const std::string& path) {
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot open dataset ", path, ": ",
                     errno ? std::strerror(errno) : "gzopen failed",
                     " (pass --data=<path to digits.csv.gz>)"));
  }
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  std::string line;
  char buf[4096];
  int64_t line_no = 0;
  while (gzgets(file.get(), buf, sizeof(buf)) != nullptr) {
    line = buf;
    ++line_no;
    absl::string_view row = absl::StripAsciiWhitespace(line);
    if (row.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(row, ',');
    if (fields.size() != kPixels + 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": expected ",
                                                     kPixels + 1, " values, found ",
                                                     fields.size()));
    }
    for (int i = 0; i <= kPixels; ++i) {
      int v = 0;
      const int hi = i < kPixels ? kMaxPixel : kClasses - 1;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[i]), &v) || v < 0 ||
          v > hi) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_no, ": value ", i + 1, " ('", fields[i],
                         "') is not an integer in [0, ", hi, "]"));
      }
      if (i < kPixels) {
        pixels.push_back(static_cast<float>(v) / kMaxPixel);
      } else {
        labels.push_back(v);
      }
    }
  }
  int err = Z_OK;
  const char* msg = gzerror(file.get(), &err);
  if (err != Z_OK && err != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat("reading dataset ", path, " failed: ", msg));
  }
  if (labels.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset ", path, " holds no rows"));
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  Digits d;
  d.images = at::from_blob(pixels.data(), {n, kPixels}, at::kFloat).clone();
  d.labels = at::from_blob(labels.data(), {n}, at::kLong).clone();
  return d;
}

std::pair<Digits, Digits> SplitDigits(const Digits& all, double train_fraction,
                                      uint64_t seed) {
  const int64_t n = all.size();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  ddp::Rng rng(seed);
  rng.Shuffle(order);
  const int64_t n_train = static_cast<int64_t>(std::llround(train_fraction * n));
  auto take = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(order.begin() + begin, order.begin() + end);
    const at::Tensor index = at::from_blob(idx.data(), {end - begin}, at::kLong).clone();
    return Digits{all.images.index_select(0, index), all.labels.index_select(0, index)};
  };
  return {take(0, n_train), take(n_train, n)};
}

}  // namespace syncline::train
