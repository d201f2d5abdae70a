// sampler.cc: DistributedSampler.
#include "syncline/ddp/sampler.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "syncline/ddp/error.h"
#include "syncline/ddp/seed.h"
#include "syncline/log.h"
#include "syncline/status.h"

namespace syncline::ddp {

namespace {

absl::Status CheckOptions(const DistributedSamplerOptions& options) {
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
  return absl::OkStatus();
}

const DistributedSamplerOptions& CheckedOrThrow(
    const DistributedSamplerOptions& options) {
  absl::Status ok = CheckOptions(options);
  if (!ok.ok()) throw Error(ok.code(), std::string(ok.message()));
  return options;
}

}  // namespace

absl::StatusOr<DistributedSampler> DistributedSampler::Create(
    const DistributedSamplerOptions& options) {
  SL_RETURN_IF_ERROR(CheckOptions(options));
  return DistributedSampler(options, Validated{});
}

DistributedSampler::DistributedSampler(const DistributedSamplerOptions& options)
    : DistributedSampler(CheckedOrThrow(options), Validated{}) {}

DistributedSampler::DistributedSampler(const DistributedSamplerOptions& options,
                                       Validated)
    : s_(std::make_shared<Shared>()) {
  s_->options = options;
  const int64_t n = options.dataset_size;
  const int64_t w = options.num_replicas;
  s_->num_samples = options.drop_last ? n / w : (n + w - 1) / w;
  BuildOrder();
}

int64_t DistributedSampler::num_samples() const { return s_->num_samples; }
int64_t DistributedSampler::total_size() const {
  return s_->num_samples * s_->options.num_replicas;
}
int64_t DistributedSampler::epoch() const { return s_->epoch; }
int64_t DistributedSampler::position() const { return s_->position; }
int64_t DistributedSampler::remaining() const { return s_->num_samples - s_->position; }

void DistributedSampler::reset(c10::optional<size_t> new_size) {
  if (new_size.has_value() &&
      static_cast<int64_t>(*new_size) != s_->options.dataset_size) {
    throw Error(absl::StatusCode::kInvalidArgument,
                absl::StrFormat("DistributedSampler: reset to a dataset of %d samples, "
                                "but it was made for %d; "
                                "every rank must shard the same dataset, so make a new "
                                "sampler for the new size",
                                *new_size, s_->options.dataset_size));
  }
  // An unfinished pass that nothing resumed (no SetEpoch/Restore since it
  // started) is abandoned: the next one starts at the top (and warns if it
  // repeats the epoch's order).
  if (!s_->epoch_fresh && s_->position > 0) s_->position = 0;
  s_->exhausted = false;
}

c10::optional<DistributedSampler::BatchRequestType> DistributedSampler::next(
    size_t batch_size) {
  if (s_->exhausted) return c10::nullopt;
  std::vector<int64_t> batch = NextBatch(static_cast<int64_t>(batch_size));
  if (batch.empty()) {
    s_->exhausted = true;
    return c10::nullopt;
  }
  return BatchRequestType(batch.begin(), batch.end());
}

// Builds this rank's slice of the epoch's global order. The global order is
// computed in full on every rank (O(dataset)), which is what makes the
// shards agree without any communication.
void DistributedSampler::BuildOrder() {
  const int64_t n = s_->options.dataset_size;
  const int64_t total = total_size();
  std::vector<int64_t> global(static_cast<size_t>(n));
  std::iota(global.begin(), global.end(), int64_t{0});
  if (s_->options.shuffle) {
    Rng rng(DataOrderSeed(s_->options.seed, s_->epoch));
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
  s_->order.clear();
  s_->order.reserve(static_cast<size_t>(s_->num_samples));
  for (int64_t i = s_->options.rank; i < total; i += s_->options.num_replicas) {
    s_->order.push_back(global[static_cast<size_t>(i)]);
  }
}

void DistributedSampler::SetEpoch(int64_t epoch) {
  s_->epoch_fresh = true;
  if (epoch == s_->epoch && s_->position > 0) return;  // resuming inside the epoch
  s_->position = 0;
  if (epoch != s_->epoch) {
    s_->epoch = epoch;
    BuildOrder();
  }
}

std::vector<int64_t> DistributedSampler::NextBatch(int64_t batch_size) {
  if (s_->position >= s_->num_samples) {
    // End of the pass: rewind, and require a SetEpoch() for the next one.
    s_->position = 0;
    s_->epoch_fresh = false;
    return {};
  }
  if (s_->position == 0) {
    if (!s_->epoch_fresh && s_->options.rank == 0) {
      LogWarnOnce(
          "DistributedSampler.set_epoch",
          absl::StrFormat("DistributedSampler: a new pass over epoch %d started without "
                          "SetEpoch(); every such epoch repeats the same order. Call "
                          "sampler.SetEpoch(epoch) at the start of each epoch.",
                          s_->epoch));
    }
    s_->epoch_fresh = false;
  }
  const int64_t take =
      std::max<int64_t>(0, std::min(batch_size, s_->num_samples - s_->position));
  std::vector<int64_t> batch(s_->order.begin() + s_->position,
                             s_->order.begin() + s_->position + take);
  s_->position += take;
  return batch;
}

std::vector<int64_t> DistributedSampler::Indices() const { return s_->order; }

SamplerState DistributedSampler::State() const {
  SamplerState s;
  s.epoch = s_->epoch;
  s.position = s_->position;
  s.dataset_size = s_->options.dataset_size;
  s.num_replicas = s_->options.num_replicas;
  s.seed = s_->options.seed;
  s.shuffle = s_->options.shuffle;
  s.drop_last = s_->options.drop_last;
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
  if (state.dataset_size != s_->options.dataset_size) {
    return mismatch("dataset_size", text(state.dataset_size),
                    text(s_->options.dataset_size));
  }
  if (state.num_replicas != s_->options.num_replicas) {
    return mismatch("num_replicas (world size)", text(state.num_replicas),
                    text(s_->options.num_replicas));
  }
  if (state.seed != s_->options.seed) {
    return mismatch("seed", text(state.seed), text(s_->options.seed));
  }
  if (state.shuffle != s_->options.shuffle) {
    return mismatch("shuffle", text(state.shuffle), text(s_->options.shuffle));
  }
  if (state.drop_last != s_->options.drop_last) {
    return mismatch("drop_last", text(state.drop_last), text(s_->options.drop_last));
  }
  if (state.position < 0 || state.position > s_->num_samples) {
    return absl::FailedPreconditionError(
        absl::StrFormat("DistributedSampler: saved position %d is outside [0, %d]",
                        state.position, s_->num_samples));
  }
  if (state.epoch != s_->epoch) {
    s_->epoch = state.epoch;
    BuildOrder();
  }
  s_->position = state.position;
  s_->epoch_fresh = true;
  return absl::OkStatus();
}

}  // namespace syncline::ddp
