// checkpoint_test.cc: Checkpointer round trips, corruption and fallback,
// crashes in the middle of a save, and the collective behaviour on 2 ranks.
#include "syncline/ddp/checkpoint.h"

#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "common/scratch_dir.h"
#include "syncline/communicator.h"
#include "syncline/ddp/grad_scaler.h"

namespace syncline::ddp {
namespace {

using ::syncline::testing::RunOptions;
using ::syncline::testing::RunRanks;

struct Net : torch::nn::Module {
  explicit Net(int64_t width = 4) {
    at::manual_seed(1);
    fc = register_module("fc", torch::nn::Linear(width, 3));
  }
  torch::nn::Linear fc{nullptr};
};

// A model and an optimizer with real momentum state.
struct Trainee {
  explicit Trainee(int64_t width = 4)
      : net(std::make_shared<Net>(width)),
        opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)) {}
  void Step() {
    opt.zero_grad();
    net->fc->forward(at::ones({2, net->fc->options.in_features()})).sum().backward();
    opt.step();
  }
  CheckpointTargets Targets() {
    CheckpointTargets t;
    t.model = net.get();
    t.optimizer = &opt;
    return t;
  }
  std::shared_ptr<Net> net;
  torch::optim::SGD opt;
};

std::string MakeTempDir() { return syncline::testing::ScratchDir(); }

TrainingProgress ProgressAt(int64_t step) {
  TrainingProgress p;
  p.epoch = step / 10;
  p.step = step;
  p.sampler.epoch = p.epoch;
  p.sampler.position = step % 10;
  p.sampler.dataset_size = 100;
  p.sampler.num_replicas = 1;
  p.sampler.seed = 7;
  p.config = {{"model", "test"}, {"lr", "0.1"}};
  return p;
}

std::unique_ptr<Checkpointer> MustCreate(const std::string& dir, int keep = 3) {
  auto ckpt = Checkpointer::Create(nullptr, {.dir = dir, .keep_last = keep});
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  return ckpt.ok() ? *std::move(ckpt) : nullptr;
}

void FlipByte(const std::string& path, off_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(offset);
  f.write(&c, 1);
}

TEST(Checkpoint, RoundTripRestoresModelOptimizerProgressAndRng) {
  const std::string dir = MakeTempDir();
  Trainee a;
  a.Step();
  auto ckpt = MustCreate(dir);
  ASSERT_TRUE(ckpt->Save(a.Targets(), ProgressAt(17)).ok());
  const at::Tensor next_random = at::rand({4});
  a.Step();  // what an uninterrupted run would do next
  const at::Tensor expected_weight = a.net->fc->weight.detach().clone();

  Trainee b;  // a fresh process: fresh init, no momentum
  auto loaded = MustCreate(dir)->LoadLatest(b.Targets());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->progress.step, 17);
  EXPECT_EQ(loaded->progress.sampler.position, 7);
  EXPECT_EQ(loaded->progress.sampler.seed, 7u);
  EXPECT_EQ(loaded->progress.config, ProgressAt(17).config);
  EXPECT_TRUE(loaded->skipped.empty());
  EXPECT_TRUE(at::equal(at::rand({4}), next_random)) << "RNG not restored";
  b.Step();  // momentum restored: the same step as the uninterrupted run
  EXPECT_TRUE(at::equal(b.net->fc->weight, expected_weight));
}

TEST(Checkpoint, RestoresTheGradScalerAndExtraState) {
  const std::string dir = MakeTempDir();
  Trainee a;
  GradScaler scaler_a(nullptr, {.init_scale = 1024});
  CheckpointTargets targets = a.Targets();
  targets.scaler = &scaler_a;
  targets.save_extra = [](torch::serialize::OutputArchive& archive) {
    archive.write("answer", c10::IValue(int64_t{42}));
  };
  ASSERT_TRUE(MustCreate(dir)->Save(targets, ProgressAt(3)).ok());

  Trainee b;
  GradScaler scaler_b(nullptr);  // default scale 65536
  int64_t answer = 0;
  CheckpointTargets into = b.Targets();
  into.scaler = &scaler_b;
  into.load_extra = [&answer](torch::serialize::InputArchive& archive) {
    c10::IValue v;
    archive.read("answer", v);
    answer = v.toInt();
  };
  auto loaded = MustCreate(dir)->LoadLatest(into);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(scaler_b.scale(), 1024);
  EXPECT_EQ(answer, 42);

  // Asking for a part the checkpoint lacks is refused before anything moves.
  Trainee c;
  CheckpointTargets with_extra = c.Targets();
  with_extra.load_extra = [](torch::serialize::InputArchive&) {};
  ASSERT_TRUE(MustCreate(dir)->Save(c.Targets(), ProgressAt(4)).ok());
  auto refused = MustCreate(dir)->LoadLatest(with_extra);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition)
      << refused.status();
}

TEST(Checkpoint, EmptyFolderIsNotFound) {
  Trainee a;
  auto loaded = MustCreate(MakeTempDir())->LoadLatest(a.Targets());
  EXPECT_TRUE(absl::IsNotFound(loaded.status())) << loaded.status();
}

TEST(Checkpoint, KeepsTheLastK) {
  const std::string dir = MakeTempDir();
  Trainee a;
  auto ckpt = MustCreate(dir, /*keep=*/2);
  for (int step = 1; step <= 5; ++step) {
    ASSERT_TRUE(ckpt->Save(a.Targets(), ProgressAt(step)).ok());
  }
  const std::vector<std::string> files = ckpt->List();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_NE(files[0].find("checkpoint-000004.pt"), std::string::npos);
  EXPECT_NE(files[1].find("checkpoint-000005.pt"), std::string::npos);
  EXPECT_TRUE(VerifyCheckpointFile(files[1]).ok());
}

// Corruptions of the newest checkpoint: each must be named and skipped.
class CorruptLatest : public ::testing::TestWithParam<const char*> {};

TEST_P(CorruptLatest, FallsBackToThePreviousOne) {
  const std::string how = GetParam();
  const std::string dir = MakeTempDir();
  Trainee a;
  auto ckpt = MustCreate(dir);
  ASSERT_TRUE(ckpt->Save(a.Targets(), ProgressAt(1)).ok());
  const at::Tensor good_weight = a.net->fc->weight.detach().clone();
  a.Step();
  ASSERT_TRUE(ckpt->Save(a.Targets(), ProgressAt(2)).ok());
  const std::string latest = ckpt->List().back();
  struct stat st;
  ASSERT_EQ(::stat(latest.c_str(), &st), 0);
  if (how == std::string("flip")) {
    FlipByte(latest, st.st_size / 2);
  } else if (how == std::string("truncate")) {
    ASSERT_EQ(::truncate(latest.c_str(), st.st_size / 3), 0);
  } else {
    ASSERT_EQ(::unlink(latest.c_str()), 0);
  }
  const absl::Status verify = VerifyCheckpointFile(latest);
  ASSERT_FALSE(verify.ok());
  EXPECT_NE(verify.message().find(latest), std::string::npos) << verify;

  Trainee b;
  auto loaded = MustCreate(dir)->LoadLatest(b.Targets());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->progress.step, 1);
  ASSERT_EQ(loaded->skipped.size(), 1u);
  EXPECT_NE(loaded->skipped[0].find(latest), std::string::npos) << loaded->skipped[0];
  EXPECT_TRUE(at::equal(b.net->fc->weight, good_weight));
}

INSTANTIATE_TEST_SUITE_P(Ways, CorruptLatest,
                         ::testing::Values("flip", "truncate", "missing"));

TEST(Checkpoint, AllCorruptIsDataLossNamingTheFiles) {
  const std::string dir = MakeTempDir();
  Trainee a;
  auto ckpt = MustCreate(dir);
  ASSERT_TRUE(ckpt->Save(a.Targets(), ProgressAt(1)).ok());
  ASSERT_TRUE(ckpt->Save(a.Targets(), ProgressAt(2)).ok());
  for (const std::string& f : ckpt->List()) FlipByte(f, 100);
  Trainee b;
  const at::Tensor before = b.net->fc->weight.detach().clone();
  auto loaded = MustCreate(dir)->LoadLatest(b.Targets());
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(loaded.status().message().find("checkpoint-000001.pt"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("checkpoint-000002.pt"), std::string::npos);
  EXPECT_TRUE(at::equal(b.net->fc->weight, before)) << "model was touched";
}

TEST(Checkpoint, DifferentModelIsAClearErrorAndTouchesNothing) {
  const std::string dir = MakeTempDir();
  Trainee a(/*width=*/4);
  ASSERT_TRUE(MustCreate(dir)->Save(a.Targets(), ProgressAt(1)).ok());
  Trainee b(/*width=*/5);
  const at::Tensor before = b.net->fc->weight.detach().clone();
  auto loaded = MustCreate(dir)->LoadLatest(b.Targets());
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition)
      << loaded.status();
  EXPECT_NE(loaded.status().message().find("different model"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("fc.weight"), std::string::npos)
      << loaded.status();
  EXPECT_TRUE(at::equal(b.net->fc->weight, before));
}

TEST(Checkpoint, UnwritableFolderIsAnError) {
  // A path below a regular file cannot be created, even by root.
  const std::string dir = MakeTempDir();
  const std::string file = dir + "/plain-file";
  std::ofstream(file) << "x";
  auto ckpt = Checkpointer::Create(nullptr, {.dir = file + "/ckpt"});
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.status().message().find(file), std::string::npos) << ckpt.status();
}

// A process killed at each point of a save. Stages before "committed" must
// leave the previous checkpoint as the newest good one.
class KilledMidSave : public ::testing::TestWithParam<const char*> {};

TEST_P(KilledMidSave, LeavesThePreviousCheckpointIntact) {
  const std::string stage = GetParam();
  const char* env_dir = std::getenv("SL_CKPT_TEST_DIR");
  const std::string dir = env_dir ? env_dir : MakeTempDir();
  if (!syncline::testing::IsChild()) {
    Trainee a;
    ASSERT_TRUE(MustCreate(dir)->Save(a.Targets(), ProgressAt(1)).ok());
  }
  RunOptions options;
  options.env["SL_CKPT_TEST_DIR"] = dir;
  auto results = RunRanks(
      1,
      [&](int, int) {
        Trainee a;
        a.Step();
        CheckpointOptions o{.dir = dir};
        o.fault_hook = [&stage](absl::string_view s) {
          if (s == stage) std::raise(SIGKILL);
        };
        auto ckpt = Checkpointer::Create(nullptr, o);
        ASSERT_TRUE(ckpt.ok()) << ckpt.status();
        ASSERT_TRUE((*ckpt)->Save(a.Targets(), ProgressAt(2)).ok());
      },
      options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].signal, SIGKILL) << results[0].output;

  Trainee b;
  auto loaded = MustCreate(dir)->LoadLatest(b.Targets());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->skipped.empty());
  EXPECT_EQ(loaded->progress.step, stage == std::string("committed") ? 2 : 1);
  EXPECT_TRUE(VerifyCheckpointFile(loaded->path).ok());
}

INSTANTIATE_TEST_SUITE_P(Stages, KilledMidSave,
                         ::testing::Values("data-temp", "data", "manifest-temp",
                                           "committed"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace syncline::ddp
