// trainer.h: the reference training loop behind `syncline-train`.
//
// One process per rank. The loop is the canonical DDP recipe on Syncline:
// a Communicator from the environment, a DistributedSampler per epoch,
// micro-batches under NoSync() for gradient accumulation, optional autocast
// (bf16 on CPU, f16 with a GradScaler on CUDA), and collective checkpoints
// that a killed job resumes from exactly.
//
// Failures are one line on every rank and a non-zero exit: startup checks
// (dataset, batch size, checkpoint folder) are exchanged between ranks so
// nobody waits on a rank that already gave up.
#ifndef SYNCLINE_EXAMPLES_TRAIN_TRAINER_H_
#define SYNCLINE_EXAMPLES_TRAIN_TRAINER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace syncline::train {

// TrainConfig
//
// The command line, validated by ValidateConfig().
struct TrainConfig {
  std::string model = "mlp";
  int64_t epochs = 15;
  int64_t batch_size = 32;  // per rank, per micro-batch
  double lr = 0.1;
  // The learning rate of epoch e is lr * lr_decay^e: it depends on the
  // epoch only (not on --epochs), so a run resumed with more epochs
  // continues exactly.
  double lr_decay = 0.9;
  int64_t accum_steps = 1;  // micro-batches per optimizer step
  bool amp = false;
  std::string checkpoint_dir;
  bool resume = false;
  int64_t checkpoint_every = 0;  // optimizer steps; 0: end of epochs only
  int keep_checkpoints = 3;
  uint64_t seed = 0;
  std::string device = "cpu";
  double bucket_cap_mb = 25;
  std::string data;
  std::string save_params;
  // Testing: after this many epochs (and their checkpoint), every rank
  // kills itself with SIGKILL, as if the job had been killed. 0: never.
  int64_t kill_after_epoch = 0;
};

// InvalidArgument naming the flag for a value out of range.
absl::Status ValidateConfig(const TrainConfig& config);

// Runs the training; returns the process exit code (0 on success). Prints
// its own errors (one line, on every rank).
int RunTrainer(const TrainConfig& config);

}  // namespace syncline::train

#endif  // SYNCLINE_EXAMPLES_TRAIN_TRAINER_H_
