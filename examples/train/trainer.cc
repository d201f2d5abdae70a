// trainer.cc: setup, resume, the epoch loop and checkpointing of
// syncline-train.
#include "trainer.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "syncline/ddp/agreement.h"
#include "syncline/ddp/seed.h"
#include "syncline/rendezvous.h"
#include "syncline/status.h"
#include "trainer_impl.h"

namespace syncline::train {
namespace {

// The one-line error every failing rank prints.
void PrintError(int rank, int world_size, absl::string_view message) {
  const std::string line = absl::StrReplaceAll(message, {{"\n", " "}});
  if (rank >= 0 && world_size > 1) {
    std::fprintf(stderr, "[rank %d/%d] syncline-train: error: %s\n", rank, world_size,
                 line.c_str());
  } else {
    std::fprintf(stderr, "syncline-train: error: %s\n", line.c_str());
  }
  std::fflush(stderr);
}

// OMP_NUM_THREADS, or 1: on a shared CPU box every rank is a process, and
// libtorch's default of one thread per core would oversubscribe it.
int IntraOpThreads() {
  int n = 0;
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env != nullptr && absl::SimpleAtoi(env, &n) && n > 0) return n;
  return 1;
}

}  // namespace

absl::Status ValidateConfig(const TrainConfig& c) {
  auto bad = [](absl::string_view flag, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", why));
  };
  if (c.model != "mlp" && c.model != "cnn") return bad("model", "must be mlp or cnn");
  if (c.epochs < 1) return bad("epochs", "must be at least 1");
  if (c.batch_size < 1) return bad("batch-size", "must be at least 1");
  if (c.accum_steps < 1) return bad("accum-steps", "must be at least 1");
  if (!(c.lr > 0)) return bad("lr", "must be positive");
  if (!(c.lr_decay > 0 && c.lr_decay <= 1)) {
    return bad("lr-decay", "must be in (0, 1]");
  }
  if (c.device != "cpu" && c.device != "cuda")
    return bad("device", "must be cpu or cuda");
  if (!(c.bucket_cap_mb > 0)) return bad("bucket-cap-mb", "must be positive");
  if (c.checkpoint_every < 0) return bad("checkpoint-every", "must be >= 0");
  if (c.resume && c.checkpoint_dir.empty()) {
    return bad("resume", "needs --checkpoint-dir");
  }
  if (c.data.empty()) return bad("data", "is empty");
  return absl::OkStatus();
}

absl::Status Trainer::Init() {
  at::set_num_threads(IntraOpThreads());
  CommunicatorOptions options;
  if (c_.device == "cuda") {
    // Checked before connecting, so a machine without a GPU fails at once on
    // every rank instead of in the backend.
    if (!torch::cuda::is_available()) {
      return absl::FailedPreconditionError(
          "--device cuda: no CUDA device is available on this machine");
    }
    const auto info = ResolveRendezvous(-1, -1);
    const int local = info.ok() ? info->local_rank : 0;
    const int index = local % static_cast<int>(torch::cuda::device_count());
    device_ = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
    options.device = Device::Cuda(index);
  }
  SL_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, Communicator::Create(options));
  comm_ = std::move(comm);
  progress_ = std::make_unique<Progress>(comm_->rank(), comm_->size());

  // Local checks, then one exchange: every rank fails with the same reason.
  SL_RETURN_IF_ERROR(ddp::AgreeOnStatus(comm_.get(), LoadAndCheckData(), {}));
  if (!c_.checkpoint_dir.empty()) {
    ddp::CheckpointOptions checkpoint_options;
    checkpoint_options.dir = c_.checkpoint_dir;
    checkpoint_options.keep_last = c_.keep_checkpoints;
    SL_ASSIGN_OR_RETURN(checkpointer_, ddp::Checkpointer::Create(comm_, checkpoint_options));
  }

  at::manual_seed(ddp::ModelInitSeed(c_.seed));  // same init on every rank
  SL_ASSIGN_OR_RETURN(model_, MakeModel(c_.model));
  model_->to(device_);
  optimizer_ = std::make_unique<torch::optim::SGD>(
      model_->parameters(), torch::optim::SGDOptions(c_.lr).momentum(0.9));
  if (c_.amp && device_.is_cuda()) {
    scaler_ = std::make_unique<ddp::GradScaler>(comm_);
  }
  if (c_.resume) SL_RETURN_IF_ERROR(Resume());

  ddp::DdpOptions ddp_options;
  ddp_options.bucket_cap_mb = c_.bucket_cap_mb;
  ddp_ = std::make_unique<ddp::DistributedDataParallel>(model_, comm_, ddp_options);
  return absl::OkStatus();
}

absl::Status Trainer::LoadAndCheckData() {
  SL_ASSIGN_OR_RETURN(Digits all, LoadDigits(c_.data));
  std::tie(train_, val_) = SplitDigits(all, 0.8, kSplitSeed);
  ddp::DistributedSamplerOptions sampler_options;
  sampler_options.dataset_size = train_.size();
  sampler_options.num_replicas = comm_->size();
  sampler_options.rank = comm_->rank();
  sampler_options.shuffle = true;
  sampler_options.seed = c_.seed;
  SL_ASSIGN_OR_RETURN(ddp::DistributedSampler sampler,
                      ddp::DistributedSampler::Create(sampler_options));
  const int64_t per_step = c_.batch_size * c_.accum_steps;
  if (per_step > sampler.num_samples()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--batch-size %d x --accum-steps %d = %d samples per step is more "
        "than a rank's shard: %d training samples over %d ranks give %d per "
        "rank",
        c_.batch_size, c_.accum_steps, per_step, train_.size(), comm_->size(),
        sampler.num_samples()));
  }
  sampler_.emplace(std::move(sampler));
  train_.images = train_.images.to(device_);
  train_.labels = train_.labels.to(device_);
  val_.images = val_.images.to(device_);
  val_.labels = val_.labels.to(device_);
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> Trainer::ConfigRecord() const {
  return {{"model", c_.model},
          {"batch_size", absl::StrCat(c_.batch_size)},
          {"accum_steps", absl::StrCat(c_.accum_steps)},
          {"lr", absl::StrCat(c_.lr)},
          {"amp", c_.amp ? "true" : "false"},
          {"seed", absl::StrCat(c_.seed)},
          {"device", c_.device},
          {"world_size", absl::StrCat(comm_->size())},
          {"backend", comm_->backend_name()}};
}

absl::Status Trainer::Resume() {
  absl::StatusOr<ddp::LoadedCheckpoint> loaded =
      checkpointer_->LoadLatest(Targets(model_.get(), optimizer_.get(), scaler_.get()));
  if (absl::IsNotFound(loaded.status())) {
    progress_->Line(
        absl::StrCat("no checkpoint in ", c_.checkpoint_dir, "; starting from scratch"));
    return absl::OkStatus();
  }
  SL_RETURN_IF_ERROR(loaded.status());
  SL_RETURN_IF_ERROR(sampler_->Restore(loaded->progress.sampler));
  start_epoch_ = loaded->progress.epoch;
  step_ = loaded->progress.step;
  const ddp::SamplerState& at = loaded->progress.sampler;
  const std::string where = at.position > 0 && at.epoch == start_epoch_
                                ? absl::StrFormat("inside epoch %d, %d samples in",
                                                  start_epoch_ + 1, at.position)
                                : absl::StrFormat("after epoch %d", start_epoch_);
  progress_->Line(absl::StrFormat(
      "resumed from %s (%s, step %d%s)", loaded->path, where, step_,
      loaded->skipped.empty() ? ""
                              : absl::StrCat(", after skipping ", loaded->skipped.size(),
                                             " bad checkpoint(s)")));
  return absl::OkStatus();
}

absl::Status Trainer::SaveCheckpoint(int64_t next_epoch) {
  if (!checkpointer_) return absl::OkStatus();
  ddp::TrainingProgress p;
  p.epoch = next_epoch;
  p.step = step_;
  p.sampler = sampler_->State();
  p.config = ConfigRecord();
  return checkpointer_->Save(Targets(model_.get(), optimizer_.get(), scaler_.get()), p);
}

absl::Status Trainer::Run() {
  const absl::Time start = absl::Now();
  const int64_t per_step = c_.batch_size * c_.accum_steps;
  // Incomplete steps at the end of an epoch are dropped, so that one rank at
  // batch B*W and W ranks at batch B see exactly the same global batches.
  const int64_t steps_per_epoch = sampler_->num_samples() / per_step;
  EvalResult last;
  double best_accuracy = 0, samples_per_second = 0;
  for (int64_t epoch = start_epoch_; epoch < c_.epochs; ++epoch) {
    sampler_->SetEpoch(epoch);  // keeps a resumed mid-epoch position
    SetLearningRate(c_.lr * std::pow(c_.lr_decay, static_cast<double>(epoch)));
    const absl::Time epoch_start = absl::Now();
    double loss_sum = 0, samples = 0;
    int64_t done_in_epoch = sampler_->position() / per_step;
    while (sampler_->remaining() >= per_step) {
      loss_sum += TrainStep();
      samples += static_cast<double>(per_step);
      ++done_in_epoch;
      progress_->Step(epoch + 1, c_.epochs, done_in_epoch, steps_per_epoch,
                      loss_sum / samples);
      const bool last_in_epoch = sampler_->remaining() < per_step;
      if (c_.checkpoint_every > 0 && step_ % c_.checkpoint_every == 0 && !last_in_epoch) {
        SL_RETURN_IF_ERROR(SaveCheckpoint(epoch));
      }
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - epoch_start);
    SL_ASSIGN_OR_RETURN(const double train_loss, GlobalMean(loss_sum, samples));
    last = Evaluate();
    best_accuracy = std::max(best_accuracy, last.accuracy);
    samples_per_second = seconds > 0 ? samples * comm_->size() / seconds : 0;
    progress_->Line(
        absl::StrFormat("epoch %d/%d  train loss %.4f  val loss %.4f  val acc %.2f%%  "
                        "%.0f samples/s  backend %s x%d",
                        epoch + 1, c_.epochs, train_loss, last.loss, 100 * last.accuracy,
                        samples_per_second, comm_->backend_name(), comm_->size()));
    SL_RETURN_IF_ERROR(SaveCheckpoint(epoch + 1));
    if (c_.kill_after_epoch > 0 && epoch + 1 == c_.kill_after_epoch) {
      std::fflush(nullptr);
      std::raise(SIGKILL);
    }
  }
  if (start_epoch_ >= c_.epochs) {
    last = Evaluate();
    best_accuracy = last.accuracy;
  }
  SaveParams();
  progress_->Line(
      absl::StrFormat("done: %s, %d epochs, %d steps, val acc %.2f%% (best %.2f%%), "
                      "%.2f s, %d ranks, backend %s, %.0f samples/s",
                      c_.model, c_.epochs, step_, 100 * last.accuracy,
                      100 * best_accuracy, absl::ToDoubleSeconds(absl::Now() - start),
                      comm_->size(), comm_->backend_name(), samples_per_second));
  return absl::OkStatus();
}

int RunTrainer(const TrainConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) {
    PrintError(-1, 0, s.message());
    return 2;
  }
  Trainer trainer(config);
  absl::Status status;
  try {
    status = trainer.Init();
    if (status.ok()) status = trainer.Run();
  } catch (const c10::Error& e) {
    status = absl::InternalError(e.what_without_backtrace());
  } catch (const std::exception& e) {
    status = absl::InternalError(e.what());
  }
  if (!status.ok()) {
    PrintError(trainer.rank(), trainer.world_size(), status.message());
    return 1;
  }
  return 0;
}

}  // namespace syncline::train
