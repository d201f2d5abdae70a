// seed.h: reproducible seeding for distributed training, without libtorch.
//
// A distributed run needs two kinds of randomness, and mixing them up is a
// classic bug:
//  - Randomness that must be the SAME on every rank: model initialisation
//    (DDP broadcasts rank 0's parameters anyway, but identical init keeps a
//    1-rank and an N-rank run comparable) and the data order, which the
//    DistributedSampler derives from (seed, epoch) so that shards stay
//    disjoint.
//  - Randomness that must DIFFER per rank: data augmentation and dropout
//    masks. If every rank drew the same augmentation for its (different)
//    samples that would be harmless, but if ranks re-used each other's
//    streams, N ranks would see correlated noise.
//
// These helpers derive every stream from one user seed (`--seed`) through
// SplitMix64, so the same command gives the same numbers on any platform (no
// dependence on std::shuffle or std::uniform_int_distribution, whose
// algorithms differ between standard libraries).
//
// Example:
//   torch::manual_seed(syncline::ddp::ModelInitSeed(flags.seed));
//   auto model = BuildModel();
//   syncline::ddp::Rng aug(syncline::ddp::AugmentationSeed(flags.seed, rank, epoch));
//   float jitter = aug.Uniform01();
#ifndef SYNCLINE_DDP_SEED_H_
#define SYNCLINE_DDP_SEED_H_

#include <cstdint>
#include <vector>

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::ddp {

// SplitMix64()
//
// One step of the SplitMix64 mixer: a bijective, well-distributed hash of a
// 64-bit value. Used to derive independent seeds from one base seed.
uint64_t SplitMix64(uint64_t x);

// ModelInitSeed()
//
// The seed for model initialisation: identical on every rank by design (it
// does not take the rank). Feed it to torch::manual_seed() before building
// the model.
uint64_t ModelInitSeed(uint64_t base_seed);

// DataOrderSeed()
//
// The seed of the data order of `epoch`, identical on every rank. The
// DistributedSampler uses it; exposed so other samplers can agree with it.
uint64_t DataOrderSeed(uint64_t base_seed, int64_t epoch);

// AugmentationSeed()
//
// A per-rank seed for data augmentation (or dropout) in `epoch`: distinct for
// every (rank, epoch) pair, and the same across reruns of the same command.
// Seeding per epoch (rather than once) keeps a run resumed at an epoch
// boundary identical to one that never stopped.
uint64_t AugmentationSeed(uint64_t base_seed, int rank, int64_t epoch);

// Rng
//
// A small deterministic generator (SplitMix64 stream) with an explicit state,
// so callers can checkpoint it as one integer. Not thread-safe; one per user.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // The next raw 64-bit value.
  uint64_t Next();
  // A uniform integer in [0, bound), without modulo bias. `bound` > 0.
  uint64_t Below(uint64_t bound);
  // A uniform double in [0, 1).
  double Uniform01();
  // Shuffles `values` in place (Fisher-Yates).
  void Shuffle(std::vector<int64_t>& values);

  uint64_t state() const { return state_; }
  void set_state(uint64_t state) { state_ = state; }

 private:
  uint64_t state_;
};

}  // namespace syncline::ddp

#pragma GCC visibility pop

#endif  // SYNCLINE_DDP_SEED_H_
