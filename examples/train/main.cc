// main.cc: the command line of `syncline-train`, the reference trainer.
//
//   syncline-run -n 2 build/bin/syncline-train            # 2 CPU ranks
//   SYNCLINE_BACKEND=nccl syncline-run -n 8 syncline-train --device cuda --amp
//
// The backend, rank and world size come from the environment (see
// `syncline-run --help-env`); everything about the training is a flag.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "tools/cli/usage.h"
#include "trainer.h"

#ifndef SYNCLINE_DEFAULT_DATA
#define SYNCLINE_DEFAULT_DATA "data/digits.csv.gz"
#endif

ABSL_FLAG(std::string, model, "mlp", "Model: mlp or cnn.");
ABSL_FLAG(int64_t, epochs, 15, "Number of epochs.");
ABSL_FLAG(int64_t, batch_size, 32,
          "Samples per rank per micro-batch (the global batch is "
          "batch-size x accum-steps x world size).");
ABSL_FLAG(double, lr, 0.1, "Learning rate (SGD with momentum 0.9).");
ABSL_FLAG(double, lr_decay, 0.9,
          "Per-epoch learning-rate factor: epoch e uses lr * lr_decay^e.");
ABSL_FLAG(int64_t, accum_steps, 1,
          "Micro-batches per optimizer step; all but the last run under "
          "no_sync, so gradients are reduced once per step.");
ABSL_FLAG(bool, amp, false,
          "Mixed precision: bf16 autocast on CPU, f16 autocast with a "
          "GradScaler on CUDA.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Folder for checkpoints (created if needed; must be visible to "
          "every rank). Empty: no checkpoints.");
ABSL_FLAG(bool, resume, false,
          "Resume from the newest good checkpoint in --checkpoint-dir "
          "(falls back past corrupt ones; starts fresh if there is none).");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "Also checkpoint every N optimizer steps (0: only at the end of "
          "each epoch).");
ABSL_FLAG(int32_t, keep_checkpoints, 3, "How many checkpoints to keep.");
ABSL_FLAG(uint64_t, seed, 0,
          "Seed of model initialisation and data order (same on every rank).");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda (one GPU per local rank).");
ABSL_FLAG(double, bucket_cap_mb, 25, "DDP gradient bucket size in MiB.");
ABSL_FLAG(std::string, data, SYNCLINE_DEFAULT_DATA,
          "Path of digits.csv.gz (the UCI digits, see data/README.md).");
ABSL_FLAG(std::string, save_params, "",
          "Rank 0 writes the final parameters here (raw float32, in "
          "named_parameters order), for tests that compare runs.");
ABSL_FLAG(int64_t, kill_after_epoch, 0,
          "Testing: after this many epochs and their checkpoint, every rank "
          "kills itself with SIGKILL. 0: never.");

int main(int argc, char** argv) {
  syncline::cli::Usage help;
  help.program = "syncline-train";
  help.description =
      "Trains a digits classifier (an MLP or a CNN) with Syncline's "
      "DistributedDataParallel, one process per rank, and reports the validation "
      "accuracy after each epoch from rank 0. The backend comes from SYNCLINE_BACKEND "
      "(default auto: nccl for --device cuda, gloo otherwise).";
  help.epilog =
      "Example: syncline-run -n 2 syncline-train --model cnn --epochs 10 "
      "--checkpoint-dir /tmp/ckpt";
  // Dashed (--batch-size) and underscored names both work.
  if (int exit = syncline::cli::ParseOrHelp(argc, argv, help, "examples/train/"); exit >= 0) return exit;
  syncline::train::TrainConfig c;
  c.model = absl::GetFlag(FLAGS_model);
  c.epochs = absl::GetFlag(FLAGS_epochs);
  c.batch_size = absl::GetFlag(FLAGS_batch_size);
  c.lr = absl::GetFlag(FLAGS_lr);
  c.lr_decay = absl::GetFlag(FLAGS_lr_decay);
  c.accum_steps = absl::GetFlag(FLAGS_accum_steps);
  c.amp = absl::GetFlag(FLAGS_amp);
  c.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  c.resume = absl::GetFlag(FLAGS_resume);
  c.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  c.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.device = absl::GetFlag(FLAGS_device);
  c.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  c.data = absl::GetFlag(FLAGS_data);
  c.save_params = absl::GetFlag(FLAGS_save_params);
  c.kill_after_epoch = absl::GetFlag(FLAGS_kill_after_epoch);
  return syncline::train::RunTrainer(c);
}
