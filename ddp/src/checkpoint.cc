// checkpoint.cc: Checkpointer: what goes into a checkpoint, and the
// collective protocol around the files (see checkpoint_files.h for the disk
// side and rank_agreement.h for the agreement steps).
#include "syncline/ddp/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint_files.h"
#include "checkpoint_state.h"
#include "sha256.h"
#include "syncline/ddp/agreement.h"
#include "syncline/log.h"
#include "syncline/status.h"

namespace syncline::ddp {
namespace {

std::string DataPath(const std::string& dir, int64_t seq) {
  return absl::StrCat(dir, "/", internal::DataFileName(seq));
}

}  // namespace

std::string ModelSignature(const torch::nn::Module& model) {
  std::string out;
  auto add = [&out](const char* kind, const std::string& name, const at::Tensor& t) {
    absl::StrAppend(&out, kind, " ", name, " ", c10::toString(t.scalar_type()), " [",
                    absl::StrJoin(t.sizes(), ", "), "]\n");
  };
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    add("param", item.key(), item.value());
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    add("buffer", item.key(), item.value());
  }
  return out;
}

absl::Status VerifyCheckpointFile(const std::string& data_path) {
  const size_t slash = data_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : data_path.substr(0, slash);
  const std::string base =
      slash == std::string::npos ? data_path : data_path.substr(slash + 1);
  constexpr absl::string_view kSuffix = ".pt";
  if (!absl::EndsWith(base, kSuffix)) {
    return absl::InvalidArgumentError(
        absl::StrCat(data_path, " is not a checkpoint (.pt) file"));
  }
  const std::string manifest_path =
      absl::StrCat(dir, "/", base.substr(0, base.size() - kSuffix.size()), ".manifest");
  return internal::ReadVerified(manifest_path, dir).status();
}

Checkpointer::Checkpointer(std::shared_ptr<Communicator> comm, CheckpointOptions options)
    : comm_(std::move(comm)), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Create(
    std::shared_ptr<Communicator> comm, CheckpointOptions options) {
  std::unique_ptr<Checkpointer> ckpt(
      new Checkpointer(std::move(comm), std::move(options)));
  absl::Status local = absl::OkStatus();
  if (ckpt->rank() == 0) {
    local = internal::PrepareFolder(ckpt->options_.dir);
    if (local.ok()) {
      internal::RemoveLeftovers(ckpt->options_.dir);
      const std::vector<int64_t> seqs = internal::ListCommitted(ckpt->options_.dir);
      ckpt->next_seq_ = seqs.empty() ? 1 : seqs.back() + 1;
    }
  }
  SL_RETURN_IF_ERROR(AgreeOnStatus(ckpt->comm_.get(), local, ckpt->options_.timeout));
  return ckpt;
}

std::vector<std::string> Checkpointer::List() const {
  std::vector<std::string> out;
  for (int64_t seq : internal::ListCommitted(options_.dir)) {
    out.push_back(DataPath(options_.dir, seq));
  }
  return out;
}

void Checkpointer::Hook(absl::string_view stage) const {
  if (options_.fault_hook) options_.fault_hook(stage);
}

absl::Status Checkpointer::WriteCheckpoint(const std::string& archive_bytes,
                                           const TrainingProgress& progress,
                                           const std::string& model_hash) {
  const int64_t seq = next_seq_;
  internal::Manifest m;
  m.seq = seq;
  m.data_file = internal::DataFileName(seq);
  m.bytes = static_cast<int64_t>(archive_bytes.size());
  m.sha256 = internal::Sha256Hex(archive_bytes);
  m.step = progress.step;
  m.epoch = progress.epoch;
  m.world_size = world_size();
  m.model_hash = model_hash;
  m.config = progress.config;
  SL_RETURN_IF_ERROR(internal::WriteFileAtomically(
      options_.dir, m.data_file, archive_bytes, [this] { Hook("data-temp"); }));
  Hook("data");
  SL_RETURN_IF_ERROR(internal::WriteFileAtomically(
      options_.dir, internal::ManifestFileName(seq), internal::FormatManifest(m),
      [this] { Hook("manifest-temp"); }));
  Hook("committed");
  next_seq_ = seq + 1;
  internal::PruneCheckpoints(options_.dir, options_.keep_last);
  return absl::OkStatus();
}

absl::Status Checkpointer::Save(const CheckpointTargets& targets,
                                const TrainingProgress& progress) {
  if (targets.model == nullptr) {
    return absl::InvalidArgumentError("Checkpointer::Save: no model given");
  }
  // Every rank's RNG state travels to rank 0 (collective, on every rank).
  SL_ASSIGN_OR_RETURN(std::vector<std::string> rng_states,
                      AllgatherBytes(comm_.get(), internal::CaptureRngState(comm_.get()),
                                     options_.timeout));
  absl::Status local = absl::OkStatus();
  if (rank() == 0) {
    absl::StatusOr<std::string> bytes =
        internal::SerializeCheckpoint(targets, progress, rng_states, world_size());
    local = bytes.status();
    if (local.ok()) {
      local = WriteCheckpoint(*bytes, progress,
                              internal::Sha256Hex(ModelSignature(*targets.model)));
    }
    if (!local.ok()) {
      local =
          absl::Status(local.code(), absl::StrCat("saving a checkpoint in ", options_.dir,
                                                  " failed: ", local.message()));
    }
  }
  // The barrier that releases every rank once the checkpoint is committed.
  return AgreeOnStatus(comm_.get(), local, options_.timeout);
}

absl::StatusOr<LoadedCheckpoint> Checkpointer::LoadLatest(
    const CheckpointTargets& targets) {
  if (targets.model == nullptr) {
    return absl::InvalidArgumentError("Checkpointer::LoadLatest: no model");
  }
  // 1. Locally pick the newest checkpoint that verifies and stage it.
  const std::string signature = ModelSignature(*targets.model);
  std::vector<int64_t> seqs = internal::ListCommitted(options_.dir);
  LoadedCheckpoint loaded;
  internal::StagedCheckpoint staged;
  int64_t chosen = -1;
  absl::Status local = absl::OkStatus();
  for (auto it = seqs.rbegin(); it != seqs.rend() && local.ok(); ++it) {
    const std::string path = DataPath(options_.dir, *it);
    absl::StatusOr<internal::StagedCheckpoint> s = internal::StageCheckpoint(
        options_.dir, *it, signature, targets.model->parameters().size());
    if (s.ok()) {
      staged = *std::move(s);
      chosen = *it;
      break;
    }
    if (s.status().code() == absl::StatusCode::kFailedPrecondition) {
      local = s.status();  // a different model: no point in falling back
      break;
    }
    loaded.skipped.push_back(std::string(s.status().message()));
    if (rank() == 0) {
      SL_LOG(WARN, "%s; falling back to an older checkpoint", s.status().message());
    }
  }
  if (local.ok() && chosen < 0) {
    local = seqs.empty()
                ? absl::NotFoundError(absl::StrCat("no checkpoint in ", options_.dir))
                : absl::DataLossError(
                      absl::StrCat("no checkpoint in ", options_.dir,
                                   " verifies: ", absl::StrJoin(loaded.skipped, "; ")));
  }
  SL_RETURN_IF_ERROR(AgreeOnStatus(comm_.get(), local, options_.timeout));

  // 2. Every rank must have picked the same one (a folder that is not shared
  //    between hosts would break this).
  SL_ASSIGN_OR_RETURN(std::vector<int64_t> picks,
                      AllgatherInt64(comm_.get(), chosen, options_.timeout));
  for (size_t r = 0; r < picks.size(); ++r) {
    if (picks[r] != picks[0]) {
      return absl::FailedPreconditionError(
          absl::StrCat("ranks disagree on the newest good checkpoint in ", options_.dir,
                       ": rank 0 picked ", internal::DataFileName(picks[0]), ", rank ", r,
                       " picked ", internal::DataFileName(picks[r]),
                       "; is the folder on a filesystem every rank sees?"));
    }
  }

  // 3. Apply it; only now are the targets touched.
  loaded.path = DataPath(options_.dir, chosen);
  absl::Status applied =
      internal::ApplyStaged(staged, targets, comm_.get(), rank(), &loaded.progress);
  if (!applied.ok()) {
    applied = absl::Status(applied.code(), absl::StrCat("restoring ", loaded.path,
                                                        " failed: ", applied.message()));
  }
  SL_RETURN_IF_ERROR(AgreeOnStatus(comm_.get(), applied, options_.timeout));
  return loaded;
}

}  // namespace syncline::ddp
