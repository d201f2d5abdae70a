// checkpoint_state.h: what a checkpoint file holds, and how it is turned
// into bytes and back, in two phases for loading: Stage (parse and check,
// touching nothing) and Apply (write into the live model, optimizer, ...).
//
// Layout of the torch archive (keys):
//   format, model_signature, world_size     meta
//   epoch, step, sampler_*, config          TrainingProgress
//   model/p<i>, model/b<i>                  parameters, buffers (CPU copies),
//                                           in named_parameters() order
//   optimizer, scaler, extra                nested archives, when present
//   rng/r<rank>                             each rank's RNG state (bytes)
// Parameters are stored by index, not by name, because torch archives do not
// accept dots in keys; the signature (names, dtypes, shapes) is compared
// first, so index i means the same parameter on both sides.
#ifndef SYNCLINE_DDP_SRC_CHECKPOINT_STATE_H_
#define SYNCLINE_DDP_SRC_CHECKPOINT_STATE_H_

#include <ATen/core/Tensor.h>
#include <torch/serialize/input-archive.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "syncline/communicator.h"
#include "syncline/ddp/checkpoint.h"

namespace syncline::ddp::internal {

// This rank's RNG state: the CPU generator, plus the CUDA generator of the
// communicator's device when it is a CUDA device.
std::string CaptureRngState(Communicator* comm);

// The archive bytes for rank 0 to write; `rng_states` is indexed by rank.
absl::StatusOr<std::string> SerializeCheckpoint(
    const CheckpointTargets& targets, const TrainingProgress& progress,
    const std::vector<std::string>& rng_states, int world_size);

// StagedCheckpoint
//
// A verified, parsed checkpoint, held in memory until it is applied.
struct StagedCheckpoint {
  std::string path;
  TrainingProgress progress;
  int world_size = 0;
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> buffers;
  std::vector<std::string> rng_states;  // by rank
  bool has_optimizer = false;
  bool has_scaler = false;
  bool has_extra = false;
  torch::serialize::InputArchive optimizer;
  torch::serialize::InputArchive scaler;
  torch::serialize::InputArchive extra;
};

// StageCheckpoint()
//
// Verifies checkpoint `seq` in `dir` (size, SHA-256), parses it and reads
// every tensor. DataLoss naming the file when it is unusable (the caller
// falls back to an older one); FailedPrecondition when it was saved from a
// model whose signature differs from `signature`.
absl::StatusOr<StagedCheckpoint> StageCheckpoint(const std::string& dir, int64_t seq,
                                                 const std::string& signature,
                                                 size_t num_params);

// ApplyStaged()
//
// Writes the staged state into `targets` and this rank's RNG, and returns
// the progress. Checks first that the checkpoint holds every part that
// `targets` asks for (optimizer, scaler, extra).
absl::Status ApplyStaged(StagedCheckpoint& staged, const CheckpointTargets& targets,
                         Communicator* comm, int rank, TrainingProgress* progress);

}  // namespace syncline::ddp::internal

#endif  // SYNCLINE_DDP_SRC_CHECKPOINT_STATE_H_
