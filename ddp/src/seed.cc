// seed.cc: seed derivation and the SplitMix64 generator.
#include "syncline/ddp/seed.h"

#include <cstddef>
#include <utility>

namespace syncline::ddp {
namespace {

// Distinct constants per stream kind, so that e.g. the data order of epoch 1
// never coincides with the augmentation stream of some rank.
constexpr uint64_t kOrderStream = 0x646174616f726472ULL;  // "dataordr"
constexpr uint64_t kAugStream = 0x6175676d656e7421ULL;    // "augment!"
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

}  // namespace

uint64_t SplitMix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The model seed is the user's seed itself: then `--seed 7` means
// torch::manual_seed(7), which is what a reader expects.
uint64_t ModelInitSeed(uint64_t base_seed) { return base_seed; }

uint64_t DataOrderSeed(uint64_t base_seed, int64_t epoch) {
  return SplitMix64(SplitMix64(base_seed ^ kOrderStream) + static_cast<uint64_t>(epoch));
}

uint64_t AugmentationSeed(uint64_t base_seed, int rank, int64_t epoch) {
  uint64_t s = SplitMix64(base_seed ^ kAugStream);
  s = SplitMix64(s + static_cast<uint64_t>(rank));
  return SplitMix64(s + static_cast<uint64_t>(epoch));
}

uint64_t Rng::Next() {
  state_ += kGolden;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Lemire's multiply-shift with rejection: unbiased and platform independent.
uint64_t Rng::Below(uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(Next()) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(Next()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Rng::Uniform01() {
  return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
}

void Rng::Shuffle(std::vector<int64_t>& values) {
  for (size_t i = values.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(Below(i));
    std::swap(values[i - 1], values[j]);
  }
}

}  // namespace syncline::ddp
