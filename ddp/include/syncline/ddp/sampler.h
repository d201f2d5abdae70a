// sampler.h: DistributedSampler, which splits a dataset's indices across
// ranks, epoch by epoch, and can resume in the middle of an epoch.
//
// Every rank builds the same permutation of [0, dataset_size) from
// (seed, epoch), pads it to a multiple of the world size by repeating indices
// from its start (or drops the tail), and takes every num_replicas-th index
// starting at its rank. The shards are therefore disjoint (apart from the
// padding) and their union covers the dataset. With shuffle = false the order
// is plain strided: rank r gets r, r + W, r + 2W, ...
//
// The sampler also keeps a position (how many of this rank's samples were
// handed out this epoch), so a checkpoint can record it and a resumed run
// continues with the very next batch. Every rank has the same number of
// samples per epoch, so the position is the same on every rank and rank 0's
// copy is enough for a checkpoint.
//
// Copies share one state (as a Python DistributedSampler is one object that
// the DataLoader refers to): the torch::data loader keeps a copy of the
// sampler it is given, and SetEpoch() on the caller's copy still reaches it.
//
// torch::data: the sampler is also a batch sampler for
// torch::data::make_data_loader (BatchRequestType, reset(), next()):
//
//   syncline::ddp::DistributedSampler sampler(options);   // throws on bad options
//   auto loader = torch::data::make_data_loader(
//       dataset.map(torch::data::transforms::Stack<>()), sampler,
//       torch::data::DataLoaderOptions().batch_size(32));
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     sampler.set_epoch(epoch);           // forget this and you get a warning
//     for (auto& batch : *loader) Train(batch);
//   }
//
// Thread safety: none; one sampler per training loop (the loader asks for
// indices from the thread that iterates it, whatever its workers).
//
// Example:
//   DistributedSamplerOptions options;
//   options.dataset_size = n;
//   options.num_replicas = world;
//   options.rank = rank;
//   options.seed = 42;
//   SL_ASSIGN_OR_RETURN(auto sampler, DistributedSampler::Create(options));
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     sampler.SetEpoch(epoch);          // forget this and you get a warning
//     for (auto batch = sampler.NextBatch(32); !batch.empty();
//          batch = sampler.NextBatch(32)) {
//       Train(batch);
//     }
//   }
#ifndef SYNCLINE_DDP_SAMPLER_H_
#define SYNCLINE_DDP_SAMPLER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <c10/util/Optional.h>

#include "absl/status/statusor.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::ddp {

// DistributedSamplerOptions
//
// `num_replicas` and `rank` normally come from the Communicator.
struct DistributedSamplerOptions {
  int64_t dataset_size = 0;
  int num_replicas = 1;
  int rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  // false: pad to a multiple of num_replicas by repeating from the start of
  // the (shuffled) order; true: drop the last dataset_size % num_replicas.
  bool drop_last = false;
};

// SamplerState
//
// What a checkpoint records. The shape fields let Restore() refuse a state
// from a run with a different dataset, world size or seed, where `position`
// would mean something else.
struct SamplerState {
  int64_t epoch = 0;
  int64_t position = 0;  // samples of this rank already handed out
  int64_t dataset_size = 0;
  int64_t num_replicas = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  // torch::data's batch request: the dataset indices of one batch.
  using BatchRequestType = std::vector<size_t>;

  // The same checks as Create(); throws Error (kInvalidArgument) with its
  // message, as the rest of the DDP layer throws.
  explicit DistributedSampler(const DistributedSamplerOptions& options);

  // Create()
  //
  // InvalidArgument for a negative size, rank outside [0, num_replicas), or
  // an empty shard (drop_last with fewer samples than ranks, or an empty
  // dataset).
  static absl::StatusOr<DistributedSampler> Create(
      const DistributedSamplerOptions& options);

  // SetEpoch()
  //
  // Selects the order of `epoch` and rewinds to its start, except when
  // `epoch` is the current epoch and a pass through it is under way (e.g.
  // right after Restore()): then the position is kept, so the usual
  // "SetEpoch(epoch) at the top of the loop" also works for a resumed run.
  void SetEpoch(int64_t epoch);
  void set_epoch(int64_t epoch) { SetEpoch(epoch); }  // PyTorch's spelling

  // NextBatch()
  //
  // The next up to `batch_size` indices of this rank in the current epoch,
  // advancing the position. Returns an empty vector once the epoch is
  // exhausted, and rewinds for the next pass. Starting a pass without a
  // SetEpoch() since the previous pass logs a warning once (on rank 0): the
  // epoch would repeat the previous order.
  std::vector<int64_t> NextBatch(int64_t batch_size);

  // Indices()
  //
  // All of this rank's indices for the current epoch, in order. Does not
  // move the position.
  std::vector<int64_t> Indices() const;

  // reset() / next(): torch::data's sampler interface, called by the data
  // loader at the start of each pass over it and for each batch.
  //
  // reset() starts a pass: it rewinds a pass that was left unfinished (a
  // loop broken out of), but keeps the position of a restored state or of a
  // SetEpoch() that resumed inside the epoch. A `new_size` other than the
  // dataset size throws Error (kInvalidArgument): the shards would no longer
  // agree across ranks. next() is NextBatch(), with nullopt at the end of
  // the pass and after it, until the next reset().
  void reset(c10::optional<size_t> new_size = c10::nullopt);
  c10::optional<BatchRequestType> next(size_t batch_size);

  // Samples per rank per epoch (including padding), and in total.
  int64_t num_samples() const;
  int64_t total_size() const;
  int64_t epoch() const;
  int64_t position() const;
  int64_t remaining() const;

  // State() / Restore()
  //
  // Restore() fails with FailedPrecondition, naming the field, when the
  // state was saved with a different dataset size, world size, seed,
  // shuffle or drop_last setting, or its position is out of range.
  SamplerState State() const;
  absl::Status Restore(const SamplerState& state);

 private:
  struct Validated {};
  DistributedSampler(const DistributedSamplerOptions& options, Validated);
  void BuildOrder();

  struct Shared {
    DistributedSamplerOptions options;
    int64_t num_samples = 0;
    int64_t epoch = 0;
    int64_t position = 0;
    // Whether SetEpoch() (or Restore(), or construction) happened since the
    // last pass started; a pass that starts without it repeats an order.
    bool epoch_fresh = true;
    std::vector<int64_t> order;  // this rank's indices for `epoch`
    // next() reached the end of the pass: it keeps answering nullopt until
    // reset(), as torch's samplers do (a loader with workers asks again).
    bool exhausted = false;
  };
  std::shared_ptr<Shared> s_;  // shared by copies
};

}  // namespace syncline::ddp

#pragma GCC visibility pop

#endif  // SYNCLINE_DDP_SAMPLER_H_
