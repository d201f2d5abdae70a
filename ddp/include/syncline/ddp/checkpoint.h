// checkpoint.h: collective checkpoints that a run can resume from exactly.
//
// A checkpoint captures everything a training loop needs to continue as if
// it never stopped: the model's parameters and buffers, the optimizer state,
// the GradScaler (if any), extra state from a caller hook, the sampler
// position, epoch and step, every rank's RNG state, and the run's config.
//
// Save() is a collective. Every rank contributes its RNG state; rank 0 writes
// the file to a temporary name, fsyncs it, renames it into place, then
// writes a manifest holding the file's size and SHA-256 the same way, and
// fsyncs the folder. An exchange of statuses (a barrier) then releases every
// rank; all ranks return the same error if rank 0 could not write. Only the
// newest `keep_last` checkpoints are kept. A process killed at any point of a
// save leaves the previous checkpoint intact and loadable.
//
// LoadLatest() is a collective too. It verifies the newest checkpoint (size,
// SHA-256, parse, model signature) before it touches the model; a truncated
// or corrupt one is reported (naming the file) and the next older one is
// tried. A checkpoint written by a different model is an error, not a
// fallback. The checkpoint folder must be visible to every rank (each rank
// reads the file itself); the ranks check that they picked the same one.
//
// Errors are absl::Status values; the libtorch edge (a corrupt archive, an
// optimizer mismatch) is caught and converted.
// Threading: call from the training thread, on every rank in the same order.
//
// Example:
//   CheckpointOptions options;
//   options.dir = "ck";
//   SL_ASSIGN_OR_RETURN(auto ckpt, Checkpointer::Create(comm, options));
//   CheckpointTargets targets;
//   targets.model = model.ptr().get();
//   targets.optimizer = &opt;
//   auto loaded = ckpt->LoadLatest(targets);
//   if (loaded.ok()) sampler.Restore(loaded->progress.sampler);
//   ...
//   TrainingProgress progress;
//   progress.epoch = e;
//   progress.step = s;
//   progress.sampler = sampler.State();
//   SL_RETURN_IF_ERROR(ckpt->Save(targets, progress));
#ifndef SYNCLINE_DDP_CHECKPOINT_H_
#define SYNCLINE_DDP_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "syncline/communicator.h"
#include "syncline/ddp/sampler.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim
namespace torch::serialize {
class InputArchive;
class OutputArchive;
}  // namespace torch::serialize

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::ddp {

class GradScaler;  // grad_scaler.h

// CheckpointOptions
struct CheckpointOptions {
  std::string dir;
  // How many committed checkpoints to keep; <= 0 keeps all.
  int keep_last = 3;
  // Deadline of each collective; 0: the communicator's default.
  absl::Duration timeout = absl::ZeroDuration();
  // For tests: called on rank 0 at named points of Save(): "data-temp"
  // (the .pt is written and fsynced under its temporary name), "data"
  // (renamed into place), "manifest-temp", "committed". A test kills the
  // process here to prove a crash leaves the previous checkpoint intact.
  std::function<void(absl::string_view stage)> fault_hook;
};

// TrainingProgress
//
// The loop's position. `epoch` and `sampler` together say where to continue:
// the epoch to run next and how far into it the sampler already was.
struct TrainingProgress {
  int64_t epoch = 0;
  int64_t step = 0;  // optimizer steps done
  SamplerState sampler;
  // The run's config (e.g. flags), recorded in the checkpoint and manifest.
  std::vector<std::pair<std::string, std::string>> config;
};

// CheckpointTargets
//
// The live objects to save from and restore into; only `model` is required.
// `model` may be the module wrapped by DistributedDataParallel: its
// parameters and buffers are saved by name. Extra state goes through the
// hooks (into a nested archive "extra"); they run on every rank.
struct CheckpointTargets {
  torch::nn::Module* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;
  GradScaler* scaler = nullptr;
  std::function<void(torch::serialize::OutputArchive&)> save_extra;
  std::function<void(torch::serialize::InputArchive&)> load_extra;
};

// LoadedCheckpoint
//
// What LoadLatest() restored, and which newer checkpoints it had to skip.
struct LoadedCheckpoint {
  std::string path;  // the .pt file
  TrainingProgress progress;
  std::vector<std::string> skipped;  // "<file>: <why>" per bad checkpoint
};

class Checkpointer {
 public:
  // Create()
  //
  // Collective. Rank 0 creates `options.dir` if needed, proves it writable,
  // and removes leftovers of interrupted saves. Every rank returns the same
  // error (e.g. "rank 0: checkpoint folder is not writable: /x: Permission
  // denied"). `comm` may be null for a single process.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Create(
      std::shared_ptr<Communicator> comm, CheckpointOptions options);

  // Save()
  //
  // Collective; see the file comment. Blocks until the checkpoint is
  // committed on disk (or failed) and every rank has arrived.
  absl::Status Save(const CheckpointTargets& targets, const TrainingProgress& progress);

  // LoadLatest()
  //
  // Collective. Restores the newest checkpoint that verifies. NotFound when
  // the folder holds no checkpoint at all; DataLoss naming every file when
  // none of them verifies; FailedPrecondition for a checkpoint of a
  // different model. On error the targets are untouched.
  absl::StatusOr<LoadedCheckpoint> LoadLatest(const CheckpointTargets& targets);

  // Committed checkpoints' .pt paths, oldest first.
  std::vector<std::string> List() const;
  const std::string& dir() const { return options_.dir; }

 private:
  Checkpointer(std::shared_ptr<Communicator> comm, CheckpointOptions options);
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int world_size() const { return comm_ ? comm_->size() : 1; }
  void Hook(absl::string_view stage) const;
  absl::Status WriteCheckpoint(const std::string& archive_bytes,
                               const TrainingProgress& progress,
                               const std::string& model_hash);

  std::shared_ptr<Communicator> comm_;
  CheckpointOptions options_;
  int64_t next_seq_ = 1;  // rank 0's next sequence number
};

// ModelSignature()
//
// One line per parameter and buffer: "name dtype [d0, d1, ...]". Two models
// can exchange checkpoints exactly when their signatures are equal.
std::string ModelSignature(const torch::nn::Module& model);

// VerifyCheckpointFile()
//
// Checks one .pt against its manifest (size, SHA-256) without loading it.
// Not collective; for tools and tests.
absl::Status VerifyCheckpointFile(const std::string& data_path);

}  // namespace syncline::ddp

#pragma GCC visibility pop

#endif  // SYNCLINE_DDP_CHECKPOINT_H_
