// checkpoint_state.cc: (de)serialization of checkpoint contents.
#include "checkpoint_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint_files.h"
#include "syncline/ddp/grad_scaler.h"
#include "syncline/status.h"

namespace syncline::ddp::internal {
namespace {

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

// libtorch errors carry a C++ backtrace; keep the first line of the message.
std::string TorchMessage(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string msg = c10 ? c10->what_without_backtrace() : e.what();
  const size_t nl = msg.find('\n');
  return nl == std::string::npos ? msg : msg.substr(0, nl);
}

at::Tensor BytesToTensor(const std::string& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::string TensorToBytes(const at::Tensor& t) {
  const at::Tensor c = t.contiguous().to(at::kCPU);
  return std::string(static_cast<const char*>(c.data_ptr()),
                     static_cast<size_t>(c.numel() * c.element_size()));
}

std::string GeneratorState(const at::Generator& gen) {
  at::Generator g = gen;  // shares the implementation
  std::lock_guard<std::mutex> lock(g.mutex());
  return TensorToBytes(g.get_state());
}

void SetGeneratorState(const at::Generator& gen, const std::string& bytes) {
  at::Generator g = gen;
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(BytesToTensor(bytes));
}

std::string FormatConfig(const TrainingProgress& p) {
  std::string out;
  for (const auto& [key, value] : p.config) {
    absl::StrAppend(&out, key, "=", value, "\n");
  }
  return out;
}

int64_t ReadInt(InputArchive& archive, const char* key) {
  c10::IValue v;
  archive.read(key, v);
  return v.toInt();
}

// The first line where two signatures differ, for the error message.
std::string FirstDifference(const std::string& saved, const std::string& now) {
  std::vector<std::string> a = absl::StrSplit(saved, '\n');
  std::vector<std::string> b = absl::StrSplit(now, '\n');
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() && !a[i].empty() ? a[i] : "(nothing)";
    const std::string y = i < b.size() && !b[i].empty() ? b[i] : "(nothing)";
    if (x != y) {
      return absl::StrCat("the checkpoint has '", x, "' where this model has '", y, "'");
    }
  }
  return "the signatures differ";
}

}  // namespace

std::string CaptureRngState(Communicator* comm) {
  const std::string cpu = GeneratorState(at::detail::getDefaultCPUGenerator());
  std::string cuda;
  if (comm != nullptr && comm->device().is_cuda()) {
    cuda = GeneratorState(at::globalContext().defaultGenerator(
        at::Device(at::kCUDA, comm->device().index)));
  }
  // [u64 length of cpu][cpu][cuda]
  const uint64_t n = cpu.size();
  std::string out(sizeof(n), '\0');
  std::memcpy(out.data(), &n, sizeof(n));
  return absl::StrCat(out, cpu, cuda);
}

absl::StatusOr<std::string> SerializeCheckpoint(
    const CheckpointTargets& targets, const TrainingProgress& progress,
    const std::vector<std::string>& rng_states, int world_size) {
  try {
    OutputArchive root;
    root.write("format", c10::IValue(int64_t{kCheckpointFormatVersion}));
    root.write("model_signature", c10::IValue(ModelSignature(*targets.model)));
    root.write("world_size", c10::IValue(int64_t{world_size}));
    root.write("epoch", c10::IValue(progress.epoch));
    root.write("step", c10::IValue(progress.step));
    const SamplerState& s = progress.sampler;
    root.write("sampler_epoch", c10::IValue(s.epoch));
    root.write("sampler_position", c10::IValue(s.position));
    root.write("sampler_dataset_size", c10::IValue(s.dataset_size));
    root.write("sampler_num_replicas", c10::IValue(s.num_replicas));
    root.write("sampler_seed", c10::IValue(static_cast<int64_t>(s.seed)));
    root.write("sampler_shuffle", c10::IValue(int64_t{s.shuffle}));
    root.write("sampler_drop_last", c10::IValue(int64_t{s.drop_last}));
    root.write("config", c10::IValue(FormatConfig(progress)));

    OutputArchive model;
    int64_t i = 0;
    for (const at::Tensor& p : targets.model->parameters()) {
      model.write(absl::StrCat("p", i++), p.detach().to(at::kCPU));
    }
    i = 0;
    for (const at::Tensor& b : targets.model->buffers()) {
      model.write(absl::StrCat("b", i++), b.detach().to(at::kCPU),
                  /*is_buffer=*/true);
    }
    root.write("model", model);
    if (targets.optimizer != nullptr) {
      OutputArchive opt;
      targets.optimizer->save(opt);
      root.write("optimizer", opt);
    }
    if (targets.scaler != nullptr) {
      OutputArchive scaler;
      targets.scaler->Save(scaler);
      root.write("scaler", scaler);
    }
    if (targets.save_extra) {
      OutputArchive extra;
      targets.save_extra(extra);
      root.write("extra", extra);
    }
    OutputArchive rng;
    for (size_t r = 0; r < rng_states.size(); ++r) {
      rng.write(absl::StrCat("r", r), BytesToTensor(rng_states[r]),
                /*is_buffer=*/true);
    }
    root.write("rng", rng);

    std::string bytes;
    root.save_to([&bytes](const void* data, size_t n) -> size_t {
      bytes.append(static_cast<const char*>(data), n);
      return n;
    });
    return bytes;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("serializing the checkpoint failed: ", TorchMessage(e)));
  }
}

absl::StatusOr<StagedCheckpoint> StageCheckpoint(const std::string& dir, int64_t seq,
                                                 const std::string& signature,
                                                 size_t num_params) {
  StagedCheckpoint s;
  s.path = absl::StrCat(dir, "/", DataFileName(seq));
  SL_ASSIGN_OR_RETURN(VerifiedFile file,
                      ReadVerified(absl::StrCat(dir, "/", ManifestFileName(seq)), dir));
  InputArchive root;
  try {
    root.load_from(file.bytes.data(), file.bytes.size());
    c10::IValue sig;
    root.read("model_signature", sig);
    if (sig.toStringRef() != signature) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", s.path, " was saved from a different model: ",
                       FirstDifference(sig.toStringRef(), signature),
                       " (use a fresh --checkpoint-dir, or the model it was made with)"));
    }
    s.world_size = static_cast<int>(ReadInt(root, "world_size"));
    s.progress.epoch = ReadInt(root, "epoch");
    s.progress.step = ReadInt(root, "step");
    SamplerState& st = s.progress.sampler;
    st.epoch = ReadInt(root, "sampler_epoch");
    st.position = ReadInt(root, "sampler_position");
    st.dataset_size = ReadInt(root, "sampler_dataset_size");
    st.num_replicas = ReadInt(root, "sampler_num_replicas");
    st.seed = static_cast<uint64_t>(ReadInt(root, "sampler_seed"));
    st.shuffle = ReadInt(root, "sampler_shuffle") != 0;
    st.drop_last = ReadInt(root, "sampler_drop_last") != 0;
    c10::IValue config;
    root.read("config", config);
    for (absl::string_view line :
         absl::StrSplit(config.toStringRef(), '\n', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv =
          absl::StrSplit(line, absl::MaxSplits('=', 1));
      s.progress.config.push_back(std::move(kv));
    }
    InputArchive model;
    root.read("model", model);
    for (size_t i = 0; i < num_params; ++i) {
      at::Tensor t;
      model.read(absl::StrCat("p", i), t);
      s.params.push_back(t);
    }
    for (size_t i = 0;; ++i) {
      at::Tensor t;
      if (!model.try_read(absl::StrCat("b", i), t, /*is_buffer=*/true)) break;
      s.buffers.push_back(t);
    }
    s.has_optimizer = root.try_read("optimizer", s.optimizer);
    s.has_scaler = root.try_read("scaler", s.scaler);
    s.has_extra = root.try_read("extra", s.extra);
    InputArchive rng;
    root.read("rng", rng);
    for (int r = 0; r < s.world_size; ++r) {
      at::Tensor t;
      rng.read(absl::StrCat("r", r), t, /*is_buffer=*/true);
      s.rng_states.push_back(TensorToBytes(t));
    }
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat("checkpoint file ", s.path, " cannot be parsed: ", TorchMessage(e)));
  }
  return s;
}

absl::Status ApplyStaged(StagedCheckpoint& s, const CheckpointTargets& targets,
                         Communicator* comm, int rank, TrainingProgress* progress) {
  // Refuse before touching anything.
  auto missing = [&s](const char* what) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", s.path, " holds no ", what, " state, but this run has ",
        what == std::string("extra") ? "an extra-state hook" : what));
  };
  if (targets.optimizer != nullptr && !s.has_optimizer) return missing("optimizer");
  if (targets.scaler != nullptr && !s.has_scaler) return missing("scaler");
  if (targets.load_extra && !s.has_extra) return missing("extra");
  if (rank >= static_cast<int>(s.rng_states.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", s.path, " was saved by ", s.world_size,
                     " ranks; it holds no RNG state for rank ", rank));
  }
  const std::vector<at::Tensor> buffers = targets.model->buffers();
  if (buffers.size() != s.buffers.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", s.path, " holds ", s.buffers.size(),
                     " buffers; the model has ", buffers.size()));
  }
  try {
    {
      torch::NoGradGuard no_grad;
      const std::vector<at::Tensor> params = targets.model->parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(s.params[i]);
      for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(s.buffers[i]);
    }
    if (targets.optimizer != nullptr) targets.optimizer->load(s.optimizer);
    if (targets.scaler != nullptr) targets.scaler->Load(s.scaler);
    if (targets.load_extra) targets.load_extra(s.extra);
    const std::string& rng = s.rng_states[static_cast<size_t>(rank)];
    uint64_t cpu_len = 0;
    if (rng.size() < sizeof(cpu_len)) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", s.path, ": RNG state too short"));
    }
    std::memcpy(&cpu_len, rng.data(), sizeof(cpu_len));
    SetGeneratorState(at::detail::getDefaultCPUGenerator(),
                      rng.substr(sizeof(cpu_len), cpu_len));
    const std::string cuda = rng.substr(sizeof(cpu_len) + cpu_len);
    if (!cuda.empty() && comm != nullptr && comm->device().is_cuda()) {
      SetGeneratorState(at::globalContext().defaultGenerator(
                            at::Device(at::kCUDA, comm->device().index)),
                        cuda);
    }
  } catch (const std::exception& e) {
    return absl::InternalError(TorchMessage(e));
  }
  *progress = s.progress;
  return absl::OkStatus();
}

}  // namespace syncline::ddp::internal
