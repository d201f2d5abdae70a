// digits.h: the UCI handwritten digits dataset (data/digits.csv.gz).
//
// 1,797 gzip-compressed CSV rows of 65 integers: 64 pixels of an 8x8 image
// (row-major, 0..16), then the label (0..9). The trainer holds it in memory
// as two tensors and splits it 80/20 into training and validation sets with
// a fixed seed, so every rank (and every run) sees the same split.
//
// Example:
//   SL_ASSIGN_OR_RETURN(Digits all, LoadDigits("data/digits.csv.gz"));
//   auto [train, val] = SplitDigits(all, 0.8, kSplitSeed);
#ifndef SYNCLINE_EXAMPLES_TRAIN_DIGITS_H_
#define SYNCLINE_EXAMPLES_TRAIN_DIGITS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace syncline::train {

// The seed of the train/validation split. Fixed on purpose (not --seed):
// changing the model's seed must not change which samples are held out.
inline constexpr uint64_t kSplitSeed = 20260101;

struct Digits {
  at::Tensor images;  // [N, 64] float32, pixels scaled to [0, 1]
  at::Tensor labels;  // [N] int64 in [0, 10)
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// LoadDigits()
//
// Reads the gzip CSV at `path`. NotFound naming the path when it is missing;
// InvalidArgument naming the line for a malformed row.
absl::StatusOr<Digits> LoadDigits(const std::string& path);

// SplitDigits()
//
// Shuffles the row indices with `seed` and returns the first
// round(train_fraction * N) rows as the training set, the rest as validation.
std::pair<Digits, Digits> SplitDigits(const Digits& all, double train_fraction,
                                      uint64_t seed);

}  // namespace syncline::train

#endif  // SYNCLINE_EXAMPLES_TRAIN_DIGITS_H_
