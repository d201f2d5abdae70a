// ddp_reducer_test.cc: reducer behaviour on 2 ranks: bucket layout, overlap,
// no_sync, unused parameters, rebuild, buffers, static graph and comm hooks.
//
// One RunRanks() body holds several checks (each rank process loads
// libtorch, so spawns are kept few). Oracle: ReplayGrads() recomputes, in
// this process, every rank's micro-batches on a copy of the model and sums
// the gradients divided by the world size: what DDP must leave in .grad.
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <string>

#include "common/multiprocess.h"
#include "ddp/ddp_test_util.h"
#include "gtest/gtest.h"
#include "syncline/ddp/comm_hooks.h"
#include "syncline/ddp/distributed.h"

namespace syncline::ddp::testing {
namespace {

constexpr int kWorld = 2;
constexpr int64_t kMicro = 8;

using Kind = ReducerEvent::Kind;

// Micro-batch `i` of rank `r`: rows of a global batch for micro-step i.
Batch Micro(int r, int i) { return Shard(MlpBatch(kMicro * kWorld, 50 + i), r, kMicro); }

at::Tensor MicroLoss(Mlp& m, int r, int i, int micro_count, bool use_extra) {
  const Batch b = Micro(r, i);
  return torch::nn::functional::mse_loss(m->forward(b.x, use_extra), b.y) / micro_count;
}

// The oracle: gradients of (1/world) * sum over ranks and micro-batches.
// `use_extra(r, i)` says whether rank r's micro-batch i uses `extra`.
Mlp ReplayGrads(int micro_count, const std::function<bool(int, int)>& use_extra) {
  Mlp oracle = MakeModel<Mlp>(7);
  for (int r = 0; r < kWorld; ++r) {
    for (int i = 0; i < micro_count; ++i) {
      (MicroLoss(oracle, r, i, micro_count, use_extra(r, i)) / kWorld).backward();
    }
  }
  return oracle;
}

void ExpectGradsMatch(Mlp& got, Mlp& want, double rtol, double atol,
                      const std::string& what) {
  auto g = got->named_parameters();
  auto w = want->named_parameters();
  for (size_t i = 0; i < g.size(); ++i) {
    const std::string name = what + " " + g[i].key();
    if (!w[i].value().grad().defined()) {
      EXPECT_FALSE(g[i].value().grad().defined()) << name << " should have no grad";
      continue;
    }
    ExpectTensorsClose(g[i].value().grad(), w[i].value().grad(), rtol, atol, name);
  }
}

void CheckOverlap(std::shared_ptr<Communicator> comm) {
  Mlp model = MakeModel<Mlp>(7);
  DdpOptions options;
  options.first_bucket_mb = options.bucket_cap_mb = 1e-9;  // 1 param/bucket
  DistributedDataParallel ddp(model.ptr(), comm, options);
  // A backward without PrepareForward() would silently skip the sync: it is
  // an error instead.
  const std::string error =
      ThrownMessage([&] { MicroLoss(model, comm->rank(), 0, 1, true).backward(); });
  EXPECT_NE(error.find("PrepareForward"), std::string::npos) << error;
  for (int iter = 0; iter < 2; ++iter) {
    ddp.PrepareForward();
    MicroLoss(model, comm->rank(), iter, 1, true).backward();
    const std::vector<ReducerEvent> events = ddp.events();
    auto pos = [&](Kind kind, bool last) {
      int found = -1;
      for (size_t i = 0; i < events.size(); ++i) {
        if (events[i].kind != kind) continue;
        found = static_cast<int>(i);
        if (!last) break;
      }
      return found;
    };
    const int first_launch = pos(Kind::kBucketLaunched, false);
    const int last_ready = pos(Kind::kGradReady, true);
    const int backward_end = pos(Kind::kBackwardEnd, false);
    ASSERT_GE(first_launch, 0);
    // The first bucket went out while gradients were still being computed.
    EXPECT_LT(first_launch, last_ready) << "iteration " << iter;
    EXPECT_LT(first_launch, backward_end) << "iteration " << iter;
    // Every bucket launched, in index order.
    int64_t expect = 0;
    for (const ReducerEvent& e : events) {
      if (e.kind == Kind::kBucketLaunched) {
        EXPECT_EQ(e.index, expect++);
      }
    }
    EXPECT_EQ(expect, static_cast<int64_t>(ddp.buckets().size()));
  }
}

// 4 micro-batches of 8, the first three inside NoSync(), give the gradient of
// one batch of 32 per rank; no collective is posted inside the window.
void CheckNoSync(std::shared_ptr<Communicator> comm, DdpOptions options,
                 const std::string& what, bool extra_in_first_only) {
  const int rank = comm->rank();
  Mlp model = MakeModel<Mlp>(7);
  DistributedDataParallel ddp(model.ptr(), comm, options);
  auto use_extra = [&](int, int i) { return !extra_in_first_only || i == 0; };
  for (int round = 0; round < 2; ++round) {  // the second runs after the rebuild
    model->zero_grad();
    {
      auto no_sync = ddp.NoSync();
      const uint64_t seq = comm->next_seq();
      for (int i = 0; i < 3; ++i) {
        ddp.PrepareForward();
        MicroLoss(model, rank, i, 4, use_extra(rank, i)).backward();
        for (const ReducerEvent& e : ddp.events()) {
          EXPECT_NE(e.kind, Kind::kBucketLaunched) << what << ": launched in no_sync";
        }
      }
      EXPECT_EQ(comm->next_seq(), seq) << what << ": communicated inside no_sync";
    }
    ddp.PrepareForward();
    MicroLoss(model, rank, 3, 4, use_extra(rank, 3)).backward();
    Mlp oracle = ReplayGrads(4, use_extra);
    ExpectGradsMatch(model, oracle, 1e-5, 1e-7, what + " round " + std::to_string(round));
  }
}

void CheckUnused(std::shared_ptr<Communicator> comm) {
  const int rank = comm->rank();
  {
    // Without find_unused_parameters: the next iteration names the
    // parameters, on every rank, and nothing hangs.
    Mlp model = MakeModel<Mlp>(7);
    DistributedDataParallel ddp(model.ptr(), comm);
    ddp.PrepareForward();
    MicroLoss(model, rank, 0, 1, /*use_extra=*/false).backward();
    const std::string error = ThrownMessage([&] { ddp.PrepareForward(); });
    EXPECT_NE(error.find("'extra.weight'"), std::string::npos) << error;
    EXPECT_NE(error.find("'extra.bias'"), std::string::npos) << error;
    EXPECT_NE(error.find("find_unused_parameters"), std::string::npos) << error;
    EXPECT_EQ(error.find("fc1"), std::string::npos) << error;
    // The wrapper is usable again afterwards.
    model->zero_grad();
    ddp.PrepareForward();
    MicroLoss(model, rank, 1, 1, true).backward();
    Mlp oracle = ReplayGrads(1, [](int, int) { return true; });
    model->zero_grad();
    ddp.PrepareForward();
    MicroLoss(model, rank, 0, 1, true).backward();
    ExpectGradsMatch(model, oracle, 1e-5, 1e-7, "after unused error");
  }
  DdpOptions find;
  find.find_unused_parameters = true;
  for (bool everywhere : {true, false}) {
    // `extra` unused on every rank (its grad stays undefined) or on rank 1
    // only (rank 0's gradient, halved, reaches both).
    Mlp model = MakeModel<Mlp>(7);
    DistributedDataParallel ddp(model.ptr(), comm, find);
    auto use_extra = [everywhere](int r, int) { return !everywhere && r == 0; };
    for (int iter = 0; iter < 2; ++iter) {
      model->zero_grad();
      ddp.PrepareForward();
      MicroLoss(model, rank, 0, 1, use_extra(rank, 0)).backward();
    }
    Mlp oracle = ReplayGrads(1, use_extra);
    ExpectGradsMatch(model, oracle, 1e-5, 1e-7,
                     everywhere ? "unused everywhere" : "unused on rank 1");
  }
  {
    // static_graph: iteration 1 finds `extra` unused; later iterations mark
    // it ready up front.
    DdpOptions stat;
    stat.static_graph = true;
    Mlp model = MakeModel<Mlp>(7);
    DistributedDataParallel ddp(model.ptr(), comm, stat);
    for (int iter = 0; iter < 3; ++iter) {
      model->zero_grad();
      ddp.PrepareForward();
      MicroLoss(model, rank, 0, 1, false).backward();
    }
    Mlp oracle = ReplayGrads(1, [](int, int) { return false; });
    ExpectGradsMatch(model, oracle, 1e-5, 1e-7, "static graph");
  }
}

// Registered output layer first, so the initial (reverse registration) order
// puts the input layer's gradients first although they are ready last.
struct ReversedImpl : torch::nn::Module {
  ReversedImpl() {
    out = register_module("out", torch::nn::Linear(16, 4));
    in = register_module("in", torch::nn::Linear(8, 16));
  }
  at::Tensor forward(const at::Tensor& x) { return out(torch::tanh(in(x))); }
  torch::nn::Linear out{nullptr}, in{nullptr};
};
TORCH_MODULE(Reversed);

// Two branches computed in a rank-dependent order, so the ready order of
// their gradients differs between ranks.
struct BranchesImpl : torch::nn::Module {
  BranchesImpl() {
    a = register_module("a", torch::nn::Linear(8, 4));
    b = register_module("b", torch::nn::Linear(8, 4));
  }
  at::Tensor forward(const at::Tensor& x, bool a_first) {
    at::Tensor ya, yb;
    if (a_first) {
      ya = a(x);
      yb = b(x);
    } else {
      yb = b(x);
      ya = a(x);
    }
    return ya + yb;
  }
  torch::nn::Linear a{nullptr}, b{nullptr};
};
TORCH_MODULE(Branches);

std::vector<int64_t> ReadyOrder(const std::vector<ReducerEvent>& events) {
  std::vector<int64_t> order;
  for (const ReducerEvent& e : events) {
    if (e.kind == Kind::kGradReady) order.push_back(e.index);
  }
  return order;
}

void CheckRebuild(std::shared_ptr<Communicator> comm) {
  const int rank = comm->rank();
  DdpOptions tiny;
  tiny.first_bucket_mb = tiny.bucket_cap_mb = 1e-9;
  {
    torch::manual_seed(3);
    Reversed model;
    DistributedDataParallel ddp(model.ptr(), comm, tiny);
    const Batch batch = Shard(MlpBatch(kMicro * kWorld, 0), rank, kMicro);
    EXPECT_EQ(ddp.buckets().front().param_names.front().rfind("in.", 0), 0u);
    ddp.PrepareForward();
    torch::nn::functional::mse_loss(model->forward(batch.x), batch.y).backward();
    const std::vector<int64_t> observed = ReadyOrder(ddp.events());
    EXPECT_FALSE(ddp.buckets_rebuilt());
    ddp.PrepareForward();  // rebuilds
    EXPECT_TRUE(ddp.buckets_rebuilt());
    const std::vector<BucketInfo> rebuilt = ddp.buckets();
    ASSERT_EQ(rebuilt.size(), observed.size());
    for (size_t i = 0; i < rebuilt.size(); ++i) {
      EXPECT_EQ(rebuilt[i].param_indices, std::vector<int64_t>{observed[i]});
    }
    EXPECT_EQ(rebuilt.front().param_names.front().rfind("out.", 0), 0u);
  }
  {
    // Ranks observe different orders; everyone adopts rank 0's.
    torch::manual_seed(3);
    Branches model;
    DistributedDataParallel ddp(model.ptr(), comm, tiny);
    const Batch batch = Shard(MlpBatch(kMicro * kWorld, 0), rank, kMicro);
    ddp.PrepareForward();
    torch::nn::functional::mse_loss(model->forward(batch.x, rank == 0), batch.y)
        .backward();
    std::vector<int64_t> mine = ReadyOrder(ddp.events());
    std::vector<int64_t> rank0 = mine;
    auto work = comm->Broadcast(View(rank0), {});
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE((*work)->Wait().ok());
    if (rank == 1) {
      EXPECT_NE(mine, rank0) << "the test needs differing orders";
    }
    ddp.PrepareForward();
    std::vector<int64_t> layout;
    for (const BucketInfo& b : ddp.buckets()) layout.push_back(b.param_indices.front());
    EXPECT_EQ(layout, rank0);
    // Still correct after the rebuild.
    model->zero_grad();
    torch::nn::functional::mse_loss(model->forward(batch.x, rank == 0), batch.y)
        .backward();
    torch::manual_seed(3);
    Branches oracle;
    for (int r = 0; r < kWorld; ++r) {
      const Batch b = Shard(MlpBatch(kMicro * kWorld, 0), r, kMicro);
      (torch::nn::functional::mse_loss(oracle->forward(b.x, true), b.y) / kWorld)
          .backward();
    }
    for (size_t i = 0; i < model->parameters().size(); ++i) {
      ExpectTensorsClose(model->parameters()[i].grad(), oracle->parameters()[i].grad(),
                         1e-5, 1e-7, "branches after rebuild");
    }
  }
}

// Mixed dtypes and sizes: buckets are per dtype, in reverse parameter
// order, with a small first bucket per dtype.
struct MixedImpl : torch::nn::Module {
  MixedImpl() {
    register_parameter("p0", torch::zeros({100}, at::kFloat));   // 400 B
    register_parameter("p1", torch::zeros({100}, at::kDouble));  // 800 B
    register_parameter("p2", torch::zeros({1000}, at::kFloat));  // 4000 B
    register_parameter("p3", torch::zeros({3000}, at::kFloat));  // 12000 B
    register_parameter("p4", torch::zeros({200}, at::kDouble));  // 1600 B
    register_parameter("frozen", torch::zeros({5}), /*requires_grad=*/false);
  }
};
TORCH_MODULE(Mixed);

void CheckInitialLayout(std::shared_ptr<Communicator> comm) {
  Mixed model;
  DdpOptions options;
  options.first_bucket_mb = 1000.0 / (1 << 20);  // 1000 B
  options.bucket_cap_mb = 10000.0 / (1 << 20);   // 10000 B
  DistributedDataParallel ddp(model.ptr(), comm, options);
  const std::vector<BucketInfo> buckets = ddp.buckets();
  // Reverse order p4 p3 p2 p1 p0: p4 fills the first f64 bucket, p3 the
  // first f32 one; p2+p0 and p1 stay under the later cap.
  const std::vector<std::vector<int64_t>> want = {{4}, {3}, {2, 0}, {1}};
  const std::vector<c10::ScalarType> want_types = {at::kDouble, at::kFloat, at::kFloat,
                                                   at::kDouble};
  ASSERT_EQ(buckets.size(), want.size());
  for (size_t b = 0; b < want.size(); ++b) {
    EXPECT_EQ(buckets[b].param_indices, want[b]) << "bucket " << b;
    EXPECT_EQ(buckets[b].dtype, want_types[b]) << "bucket " << b;
  }
  EXPECT_EQ(buckets[2].numel, 1100);
  EXPECT_EQ(buckets[2].param_names, (std::vector<std::string>{"p2", "p0"}));
}

struct WithBufferImpl : torch::nn::Module {
  WithBufferImpl() {
    fc = register_module("fc", torch::nn::Linear(8, 4));
    stat = register_buffer("stat", torch::zeros({3}));
  }
  torch::nn::Linear fc{nullptr};
  at::Tensor stat;
};
TORCH_MODULE(WithBuffer);

void CheckBuffers(std::shared_ptr<Communicator> comm) {
  const int rank = comm->rank();
  for (bool broadcast : {true, false}) {
    WithBuffer model;
    model->stat.fill_(rank + 1);
    DdpOptions options;
    options.broadcast_buffers = broadcast;
    DistributedDataParallel ddp(model.ptr(), comm, options);
    // Construction always takes rank 0's state.
    EXPECT_EQ(model->stat[0].item<float>(), 1.0f);
    model->stat.fill_(rank + 5);
    ddp.PrepareForward();
    EXPECT_EQ(model->stat[2].item<float>(), broadcast ? 5.0f : rank + 5.0f);
  }
}

void CheckHooks(std::shared_ptr<Communicator> comm) {
  const int rank = comm->rank();
  struct Case {
    std::string name;
    CommHook hook;
    double scale, rtol, atol;
  };
  // Custom: the plain sum (no division), scaled by 2 in a continuation, so
  // the result is 2 * world * mean: proves the hook's value is what lands.
  CommHook custom = [](GradBucket& bucket, Communicator& c) {
    return AllreduceSum(bucket.buffer(), c).Then([](at::Tensor t) { return t.mul_(2); });
  };
  std::vector<Case> cases = {
      {"fp16 compress", Fp16CompressHook(), 1.0, 5e-3, 2e-3},
      {"bf16 compress", Bf16CompressHook(), 1.0, 3e-2, 1e-2},
      {"custom sum x2", custom, 2.0 * kWorld, 1e-5, 1e-7},
  };
  Mlp oracle = ReplayGrads(1, [](int, int) { return true; });
  for (Case& c : cases) {
    Mlp model = MakeModel<Mlp>(7);
    DistributedDataParallel ddp(model.ptr(), comm);
    ddp.RegisterCommHook(c.hook);
    for (int iter = 0; iter < 2; ++iter) {
      model->zero_grad();
      ddp.PrepareForward();
      MicroLoss(model, rank, 0, 1, true).backward();
    }
    auto got = model->named_parameters();
    auto want = oracle->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      ExpectTensorsClose(got[i].value().grad(), want[i].value().grad() * c.scale, c.rtol,
                         c.atol, c.name + " " + got[i].key());
    }
  }
}

TEST(DdpReducerTest, OverlapNoSyncUnusedRebuildBuffersHooks) {
  auto results = syncline::testing::RunRanks(
      kWorld,
      [](int rank, int) {
        torch::set_num_threads(1);
        std::shared_ptr<Communicator> comm = Connect();
        ASSERT_NE(comm, nullptr);
        try {
          CheckInitialLayout(comm);
          CheckOverlap(comm);
          CheckNoSync(comm, {}, "no_sync", false);
          DdpOptions view;
          view.gradient_as_bucket_view = true;
          view.first_bucket_mb = 1e-4;
          CheckNoSync(comm, view, "no_sync bucket view", false);
          DdpOptions find;
          find.find_unused_parameters = true;
          // pytorch issue 69031: used in the first micro-batch only still counts.
          CheckNoSync(comm, find, "no_sync find_unused, extra in micro-batch 0", true);
          CheckUnused(comm);
          CheckRebuild(comm);
          CheckBuffers(comm);
          CheckHooks(comm);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << rank << ": " << e.what();
        }
      },
      {.timeout = absl::Seconds(200)});
  syncline::testing::ExpectAllSucceeded(results);
}

// gradient_as_bucket_view is on by default: after a synced backward every
// .grad is a view into its bucket, so with one bucket all gradients share
// one storage; turned off, each .grad is a tensor of its own (copied out).
TEST(DdpReducerTest, GradientsAreBucketViewsByDefault) {
  EXPECT_TRUE(DdpOptions{}.gradient_as_bucket_view);
  auto results = syncline::testing::RunRanks(
      kWorld,
      [](int rank, int) {
        torch::set_num_threads(1);
        std::shared_ptr<Communicator> comm = Connect();
        ASSERT_NE(comm, nullptr);
        for (const bool view : {true, false}) {
          Mlp model = MakeModel<Mlp>(7);
          DdpOptions options;
          options.first_bucket_mb = options.bucket_cap_mb = 1024;  // one bucket
          if (!view) options.gradient_as_bucket_view = false;
          DistributedDataParallel ddp(model.ptr(), comm, options);
          ddp.PrepareForward();
          MicroLoss(model, rank, 0, 1, true).backward();
          const std::vector<at::Tensor> params = model->parameters();
          ASSERT_GT(params.size(), 2u);
          size_t shared = 0;
          for (const at::Tensor& p : params) ASSERT_TRUE(p.grad().defined());
          for (size_t i = 1; i < params.size(); ++i) {
            shared += params[i].grad().is_alias_of(params[0].grad()) ? 1 : 0;
          }
          EXPECT_EQ(shared, view ? params.size() - 1 : 0u)
              << (view ? "default (bucket views)" : "gradient_as_bucket_view = false");
        }
      },
      {.timeout = absl::Seconds(120)});
  syncline::testing::ExpectAllSucceeded(results);
}

// Uneven inputs without Join(): rank 1 stops after two steps (after the
// bucket rebuild), so rank 0's third backward meets the failure in a bucket
// allreduce. It must throw the core's collective error (the op and its
// sequence number) within the communicator's timeout, not hang, and leave
// the wrapper usable for local (no_sync) work.
TEST(DdpReducerTest, UnevenInputsWithoutJoinFailCleanly) {
  auto results = syncline::testing::RunRanks(
      kWorld,
      [](int rank, int) {
        torch::set_num_threads(1);
        std::shared_ptr<Communicator> comm = Connect("gloo", absl::Seconds(5));
        ASSERT_NE(comm, nullptr);
        Mlp model = MakeModel<Mlp>(7);
        DistributedDataParallel ddp(model.ptr(), comm);
        const absl::Time start = absl::Now();
        std::string error;
        try {
          for (int step = 0; step < (rank == 0 ? 4 : 2); ++step) {
            ddp.PrepareForward();
            MicroLoss(model, rank, step, 1, true).backward();
          }
        } catch (const std::exception& e) {
          error = e.what();
        }
        if (rank == 0) {
          EXPECT_NE(error.find("syncline::ddp: "), std::string::npos) << error;
          EXPECT_NE(error.find("allreduce"), std::string::npos) << error;
          EXPECT_NE(error.find(" #"), std::string::npos) << error;
          EXPECT_NE(error.find("rank 0/2"), std::string::npos) << error;
          EXPECT_LT(absl::Now() - start, absl::Seconds(30));
          std::cerr << "rank 0 saw: " << error << "\n";
          auto no_sync = ddp.NoSync();
          ddp.PrepareForward();
          MicroLoss(model, rank, 0, 1, true).backward();
          bool ended = false;
          for (const ReducerEvent& e : ddp.events()) {
            ended |= e.kind == Kind::kBackwardEnd;
          }
          EXPECT_TRUE(ended) << "reducer state not reset after the failure";
        } else {
          EXPECT_EQ(error, "");
        }
      },
      {.timeout = absl::Seconds(60)});
  syncline::testing::ExpectAllSucceeded(results);
  // The failure is reported once, where backward() throws it: not first as
  // a bucket "dropped" while the reducer is drained for the throw.
  ASSERT_FALSE(results.empty());
  const std::string& out = results[0].output;
  EXPECT_EQ(out.find("dropping"), std::string::npos) << out;
  EXPECT_EQ(out.find("also failed"), std::string::npos) << "debug-level only: " << out;
  size_t reports = 0;
  for (size_t at = out.find("backward() throws:"); at != std::string::npos;
       at = out.find("backward() throws:", at + 1)) {
    ++reports;
  }
  EXPECT_EQ(reports, 1u) << out;
}

}  // namespace
}  // namespace syncline::ddp::testing
