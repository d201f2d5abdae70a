// sampler.cc: DistributedSampler.
#include "syncline/ddp/sampler.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "syncline/ddp/seed.h"
#include "syncline/log.h"

namespace syncline::ddp {

absl::StatusOr<DistributedSampler> DistributedSampler::Create(
    const DistributedSamplerOptions& options) {
  if (options.dataset_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DistributedSampler: dataset_size is %d; it must not be negative",
                        options.dataset_size));
  }
  if (options.num_replicas < 1 || options.rank < 0 ||
      options.rank >= options.num_replicas) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DistributedSampler: rank %d is not in [0, num_replicas=%d)",
                        options.rank, options.num_replicas));
  }
  const int64_t n = options.dataset_size;
  const int64_t w = options.num_replicas;
  const int64_t per_rank = options.drop_last ? n / w : (n + w - 1) / w;
  if (per_rank == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DistributedSampler: %d samples over %d ranks%s leaves rank %d with "
        "no samples; use a larger dataset or fewer ranks",
        n, w, options.drop_last ? " with drop_last" : "", options.rank));
  }
  return DistributedSampler(options);
}

DistributedSampler::DistributedSampler(const DistributedSamplerOptions& options)
    : options_(options) {
  const int64_t n = options.dataset_size;
  const int64_t w = options.num_replicas;
  num_samples_ = options.drop_last ? n / w : (n + w - 1) / w;
  BuildOrder();
}

// Builds this rank's slice of the epoch's global order. The global order is
// computed in full on every rank (O(dataset)), which is what makes the
// shards agree without any communication.
void DistributedSampler::BuildOrder() {
  const int64_t n = options_.dataset_size;
  const int64_t total = total_size();
  std::vector<int64_t> global(static_cast<size_t>(n));
  std::iota(global.begin(), global.end(), int64_t{0});
  if (options_.shuffle) {
    Rng rng(DataOrderSeed(options_.seed, epoch_));
    rng.Shuffle(global);
  }
  // Pad by repeating from the start; cyclically when the padding is longer
  // than the dataset (more ranks than samples), or truncate for drop_last.
  if (total > n) {
    global.reserve(static_cast<size_t>(total));
    for (int64_t i = 0; global.size() < static_cast<size_t>(total); ++i) {
      global.push_back(global[static_cast<size_t>(i % n)]);
    }
  } else {
    global.resize(static_cast<size_t>(total));
  }
  order_.clear();
  order_.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = options_.rank; i < total; i += options_.num_replicas) {
    order_.push_back(global[static_cast<size_t>(i)]);
  }
}

void DistributedSampler::SetEpoch(int64_t epoch) {
  epoch_fresh_ = true;
  if (epoch == epoch_ && position_ > 0) return;  // resuming inside the epoch
  position_ = 0;
  if (epoch != epoch_) {
    epoch_ = epoch;
    BuildOrder();
  }
}

std::vector<int64_t> DistributedSampler::NextBatch(int64_t batch_size) {
  if (position_ >= num_samples_) {
    // End of the pass: rewind, and require a SetEpoch() for the next one.
    position_ = 0;
    epoch_fresh_ = false;
    return {};
  }
  if (position_ == 0) {
    if (!epoch_fresh_ && options_.rank == 0) {
      LogWarnOnce(
          "DistributedSampler.set_epoch",
          absl::StrFormat("DistributedSampler: a new pass over epoch %d started without "
                          "SetEpoch(); every such epoch repeats the same order. Call "
                          "sampler.SetEpoch(epoch) at the start of each epoch.",
                          epoch_));
    }
    epoch_fresh_ = false;
  }
  const int64_t take =
      std::max<int64_t>(0, std::min(batch_size, num_samples_ - position_));
  std::vector<int64_t> batch(order_.begin() + position_,
                             order_.begin() + position_ + take);
  position_ += take;
  return batch;
}

std::vector<int64_t> DistributedSampler::Indices() const { return order_; }

SamplerState DistributedSampler::State() const {
  SamplerState s;
  s.epoch = epoch_;
  s.position = position_;
  s.dataset_size = options_.dataset_size;
  s.num_replicas = options_.num_replicas;
  s.seed = options_.seed;
  s.shuffle = options_.shuffle;
  s.drop_last = options_.drop_last;
  return s;
}

absl::Status DistributedSampler::Restore(const SamplerState& state) {
  // Values are passed as text: this absl predates StrFormat's %v.
  auto mismatch = [](const char* field, const std::string& saved,
                     const std::string& now) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "DistributedSampler: the saved state has %s = %s but this run has "
        "%s; resume with the same dataset, world size and sampler settings",
        field, saved, now));
  };
  auto text = [](auto v) { return absl::StrCat(v); };
  if (state.dataset_size != options_.dataset_size) {
    return mismatch("dataset_size", text(state.dataset_size),
                    text(options_.dataset_size));
  }
  if (state.num_replicas != options_.num_replicas) {
    return mismatch("num_replicas (world size)", text(state.num_replicas),
                    text(options_.num_replicas));
  }
  if (state.seed != options_.seed) {
    return mismatch("seed", text(state.seed), text(options_.seed));
  }
  if (state.shuffle != options_.shuffle) {
    return mismatch("shuffle", text(state.shuffle), text(options_.shuffle));
  }
  if (state.drop_last != options_.drop_last) {
    return mismatch("drop_last", text(state.drop_last), text(options_.drop_last));
  }
  if (state.position < 0 || state.position > num_samples_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("DistributedSampler: saved position %d is outside [0, %d]",
                        state.position, num_samples_));
  }
  if (state.epoch != epoch_) {
    epoch_ = state.epoch;
    BuildOrder();
  }
  position_ = state.position;
  epoch_fresh_ = true;
  return absl::OkStatus();
}

}  // namespace syncline::ddp
