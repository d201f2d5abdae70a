// trainer_impl.h: the Trainer class behind RunTrainer() (private to the
// trainer binary). Setup and the epoch loop live in trainer.cc; one
// optimizer step, evaluation and small helpers in trainer_step.cc.
#ifndef SYNCLINE_EXAMPLES_TRAIN_TRAINER_IMPL_H_
#define SYNCLINE_EXAMPLES_TRAIN_TRAINER_IMPL_H_

#include <c10/core/Device.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "digits.h"
#include "models.h"
#include "progress.h"
#include "syncline/communicator.h"
#include "syncline/ddp/checkpoint.h"
#include "syncline/ddp/distributed.h"
#include "syncline/ddp/grad_scaler.h"
#include "syncline/ddp/sampler.h"
#include "trainer.h"

namespace syncline::train {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

// Trainer
//
// Owns everything one rank needs. Init() and Run() may throw (libtorch and
// DDP errors); RunTrainer() turns that into one printed line.
// Threading: one thread (main) calls everything; autograd may run DDP's
// hooks on its own threads, which the wrapper handles.
class Trainer {
 public:
  explicit Trainer(const TrainConfig& config) : c_(config) {}

  absl::Status Init();
  absl::Status Run();
  int rank() const { return comm_ ? comm_->rank() : -1; }
  int world_size() const { return comm_ ? comm_->size() : 0; }

 private:
  absl::Status LoadAndCheckData();
  absl::Status Resume();
  // One optimizer step over accum_steps micro-batches; returns the summed
  // loss of its samples.
  double TrainStep();
  EvalResult Evaluate();
  absl::Status SaveCheckpoint(int64_t next_epoch);
  absl::StatusOr<double> GlobalMean(double sum, double count);
  void SaveParams() const;
  void SetLearningRate(double lr);
  std::vector<std::pair<std::string, std::string>> ConfigRecord() const;

  TrainConfig c_;
  c10::Device device_ = c10::Device(c10::kCPU);
  std::shared_ptr<Communicator> comm_;
  Digits train_, val_;
  std::optional<ddp::DistributedSampler> sampler_;
  std::shared_ptr<DigitsNet> model_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<ddp::GradScaler> scaler_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::unique_ptr<ddp::Checkpointer> checkpointer_;
  std::unique_ptr<Progress> progress_;
  int64_t start_epoch_ = 0;
  int64_t step_ = 0;
};

// The checkpoint targets of the trainer (model, optimizer, and the scaler
// when it runs f16 on CUDA).
ddp::CheckpointTargets Targets(DigitsNet* model, torch::optim::SGD* opt,
                               ddp::GradScaler* scaler);

}  // namespace syncline::train

#endif  // SYNCLINE_EXAMPLES_TRAIN_TRAINER_IMPL_H_
