// ddp_step: how much DDP over Syncline adds to a training step.
//
// Model: an MLP of three 2048x2048 linear layers with ReLU (about 12.6M
// parameters, 48 MiB of f32 gradients), per-rank batch 32, MSE loss, SGD,
// one intra-op thread per rank. Three measurements in one run:
//   single   one process, no DDP
//   nocomm   2 processes training at once, no communication (the cost of
//            sharing the cores)
//   ddp      2 processes with DistributedDataParallel over the backend
//            chosen by SYNCLINE_BACKEND (default gloo here)
// Each reports the median step time (for 2 processes, the slower rank's
// median). The figure of merit is ddp / single; ddp / nocomm isolates the
// communication. Children are the same binary started with fork+exec.
//
// Usage: ddp_step [--steps=N] [--warmup=N] [--bucket_cap_mb=X] [--bucket_view=0|1]
//                 [--json=FILE]
// The PyTorch comparison the issue asks for (python3-torch DDP, same model,
// batch, BLAS and threads) is not written yet: python3-torch is not
// installed on the build machine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "syncline/communicator.h"
#include "syncline/ddp/distributed.h"
#include "tools/cli/usage.h"

extern char** environ;

namespace {

constexpr int64_t kWidth = 2048;
constexpr int64_t kBatch = 32;

struct Flags {
  int steps = 20;
  int warmup = 3;
  double bucket_cap_mb = 25;
  // DdpOptions::gradient_as_bucket_view, its default unless set.
  bool bucket_view = syncline::ddp::DdpOptions{}.gradient_as_bucket_view;
  std::string role;          // "", "ddp" or "nocomm" (children)
  std::string out;           // children write their median here
  std::string json;          // also write the figures here (bench/compare's rounds)
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string("--") + name + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("steps"))
      (void)absl::SimpleAtoi(v, &f.steps);
    else if (const char* v = value("warmup"))
      (void)absl::SimpleAtoi(v, &f.warmup);
    else if (const char* v = value("bucket_cap_mb"))
      (void)absl::SimpleAtod(v, &f.bucket_cap_mb);
    else if (const char* v = value("bucket_view"))
      f.bucket_view = std::string(v) == "1";
    else if (const char* v = value("role"))
      f.role = v;
    else if (const char* v = value("out"))
      f.out = v;
    else if (const char* v = value("json"))
      f.json = v;
    else {
      std::fprintf(
          stderr,
          "usage: %s [--steps=N] [--warmup=N] [--bucket_cap_mb=X] [--bucket_view=0|1] "
          "[--json=FILE]\n",
          argv[0]);
      std::exit(2);
    }
  }
  return f;
}

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(kWidth, kWidth));
    fc2 = register_module("fc2", torch::nn::Linear(kWidth, kWidth));
    fc3 = register_module("fc3", torch::nn::Linear(kWidth, kWidth));
  }
  at::Tensor forward(const at::Tensor& x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp);

struct Measured {
  double step_ms = -1;       // median step
  double allreduce_ms = -1;  // ddp only: median bare allreduce of all gradients
};

// Median time of a bare allreduce (AVG, f32) of `numel` elements: what the
// gradients cost to reduce with nothing else running, the floor under
// DDP's added time when nothing overlaps.
double MeasureBareAllreduce(syncline::Communicator& comm, int64_t numel) {
  at::Tensor t = torch::ones({numel});
  syncline::AllreduceOptions options;
  options.op = syncline::ReduceOp::kAvg;
  const syncline::BufferView view = syncline::View(t.data_ptr<float>(), static_cast<size_t>(numel));
  std::vector<double> ms;
  for (int i = 0; i < 6; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto work = syncline::ddp::ThrowIfError(comm.Allreduce(view, options), "allreduce");
    syncline::ddp::ThrowIfError(work->Wait(), "allreduce");
    const auto end = std::chrono::steady_clock::now();
    if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median step time in ms, with or without DDP.
Measured MeasureSteps(const Flags& flags, bool use_ddp) {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  Mlp model;
  std::unique_ptr<syncline::ddp::DistributedDataParallel> ddp;
  if (use_ddp) {
    std::shared_ptr<syncline::Communicator> comm =
        syncline::ddp::ThrowIfError(syncline::Communicator::Create({}), "connect");
    syncline::ddp::DdpOptions options;
    options.bucket_cap_mb = flags.bucket_cap_mb;
    options.gradient_as_bucket_view = flags.bucket_view;
    ddp = std::make_unique<syncline::ddp::DistributedDataParallel>(model.ptr(), comm,
                                                                   options);
  }
  std::shared_ptr<syncline::Communicator> comm_for_bare;
  if (use_ddp) comm_for_bare = ddp->communicator();
  torch::optim::SGD opt(model->parameters(), 0.01);
  const at::Tensor x = torch::randn({kBatch, kWidth});
  const at::Tensor y = torch::randn({kBatch, kWidth});
  std::vector<double> ms;
  for (int i = 0; i < flags.warmup + flags.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    if (ddp) ddp->PrepareForward();
    torch::nn::functional::mse_loss(model->forward(x), y).backward();
    opt.step();
    const auto end = std::chrono::steady_clock::now();
    if (i >= flags.warmup) {
      ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    }
  }
  std::sort(ms.begin(), ms.end());
  Measured result;
  result.step_ms = ms[ms.size() / 2];
  if (use_ddp) {
    int64_t numel = 0;
    for (const at::Tensor& p : model->parameters()) numel += p.numel();
    result.allreduce_ms = MeasureBareAllreduce(*comm_for_bare, numel);
  }
  return result;
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Runs 2 children in `role`; returns the slower rank's medians (ms), or -1.
Measured RunPair(const Flags& flags, const std::string& role) {
  const int port = FreePort();
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int rank = 0; rank < 2; ++rank) {
    outs.push_back(absl::StrCat("/tmp/ddp_step.", ::getpid(), ".", role, ".", rank));
    std::vector<std::string> args = {
        "/proc/self/exe",
        "--role=" + role,
        "--out=" + outs.back(),
        absl::StrCat("--steps=", flags.steps),
        absl::StrCat("--warmup=", flags.warmup),
        absl::StrCat("--bucket_cap_mb=", flags.bucket_cap_mb),
        absl::StrCat("--bucket_view=", flags.bucket_view ? 1 : 0)};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
    env.push_back(absl::StrCat("SYNCLINE_RANK=", rank));
    env.push_back("SYNCLINE_WORLD_SIZE=2");
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back(absl::StrCat("MASTER_PORT=", port));
    env.push_back("SYNCLINE_STORE_HOSTED=0");
    if (std::getenv("SYNCLINE_BACKEND") == nullptr)
      env.push_back("SYNCLINE_BACKEND=gloo");
    env.push_back("OMP_NUM_THREADS=1");
    env.push_back("OPENBLAS_NUM_THREADS=1");
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    if (::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(),
                      envp.data()) != 0) {
      std::perror("posix_spawn");
      return Measured{};
    }
    pids.push_back(pid);
  }
  Measured slowest{0, 0};
  bool ok = true;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    std::ifstream in(outs[i]);
    Measured m;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0 && (in >> m.step_ms >> m.allreduce_ms)))
      ok = false;
    slowest.step_ms = std::max(slowest.step_ms, m.step_ms);
    slowest.allreduce_ms = std::max(slowest.allreduce_ms, m.allreduce_ms);
    std::remove(outs[i].c_str());
  }
  return ok ? slowest : Measured{};
}

}  // namespace

int main(int argc, char** argv) {
  syncline::cli::Usage usage;
  usage.program = "ddp_step";
  usage.description =
      "How much DDP over Syncline adds to a training step: the median step time of a "
      "3x2048x2048 MLP (per-rank batch 32, SGD, one thread per rank) in one process "
      "without DDP, in 2 processes that do not communicate, and in 2 processes with "
      "DistributedDataParallel over SYNCLINE_BACKEND (default gloo).";
  const std::vector<syncline::cli::Option> options = {
      {"--steps=N", "", "Timed steps.", "20"},
      {"--warmup=N", "", "Untimed steps first.", "3"},
      {"--bucket_cap_mb=X", "", "DdpOptions::bucket_cap_mb.", "25"},
      {"--bucket_view=0|1", "", "DdpOptions::gradient_as_bucket_view.", "1"},
      {"--json=FILE", "", "Also write the figures as JSON (bench/compare/run.sh's rounds).", ""},
  };
  if (syncline::cli::PrintHelpIfAsked(argc, argv, usage, options)) return 0;
  // OpenBLAS sizes its thread pool when it loads, before torch's
  // set_num_threads(1) can apply: pin it through the environment and
  // re-execute once.
  const char* blas_threads = std::getenv("OPENBLAS_NUM_THREADS");
  if (blas_threads == nullptr || std::string(blas_threads) != "1") {
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::execv("/proc/self/exe", argv);
    std::perror("execv");  // fall through: measure anyway
  }
  const Flags flags = ParseFlags(argc, argv);
  if (!flags.role.empty()) {
    try {
      const Measured m = MeasureSteps(flags, flags.role == "ddp");
      std::ofstream(flags.out) << m.step_ms << " " << m.allreduce_ms << "\n";
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddp_step (%s): %s\n", flags.role.c_str(), e.what());
      return 1;
    }
  }
  // Children first: the parent has not started any torch threads yet.
  const double nocomm = RunPair(flags, "nocomm").step_ms;
  const Measured ddp_run = RunPair(flags, "ddp");
  const double ddp = ddp_run.step_ms;
  const double single = MeasureSteps(flags, false).step_ms;
  std::printf(
      "ddp_step: MLP 3x%ldx%ld (12.6M params), batch %ld/rank, SGD, 1 thread/rank, "
      "%d steps after %d warm-up, bucket_cap_mb %.1f, bucket_view %d\n",
      kWidth, kWidth, kBatch, flags.steps, flags.warmup, flags.bucket_cap_mb,
      flags.bucket_view ? 1 : 0);
  std::printf("%-38s %10.2f ms\n", "single process, no DDP", single);
  std::printf("%-38s %10.2f ms\n", "2 processes, no communication", nocomm);
  std::printf("%-38s %10.2f ms\n", "2 processes, DDP", ddp);
  std::printf("%-38s %10.2f ms\n", "bare allreduce (avg) of the gradients", ddp_run.allreduce_ms);
  if (single > 0 && nocomm > 0 && ddp > 0) {
    // Without overlap (2 ranks keep both cores busy with backward), a step
    // cannot beat no-comm + the bare allreduce: that is the floor here.
    std::printf("%-38s %10.3f\n", "floor (no-comm + allreduce) / single",
                (nocomm + ddp_run.allreduce_ms) / single);
    std::printf("%-38s %10.3f\n", "ratio DDP / single", ddp / single);
    std::printf("%-38s %10.3f\n", "ratio no-comm / single (shared cores)",
                nocomm / single);
    std::printf("%-38s %10.3f\n", "ratio DDP / no-comm (communication)", ddp / nocomm);
    if (!flags.json.empty()) {
      const char* backend = std::getenv("SYNCLINE_BACKEND");
      const std::string name = backend != nullptr && *backend ? backend : "gloo";
      std::ofstream out(flags.json);
      out << absl::StrFormat(
          "{\"system\": \"syncline-ddp-%s\", \"backend\": \"%s\", \"single_ms\": %.4f, "
          "\"nocomm_ms\": %.4f, \"ddp_ms\": %.4f, \"allreduce_ms\": %.4f, "
          "\"bucket_view\": %d, \"ratio\": %.4f, \"floor\": %.4f}\n",
          name, name, single, nocomm, ddp, ddp_run.allreduce_ms, flags.bucket_view ? 1 : 0,
          ddp / single, (nocomm + ddp_run.allreduce_ms) / single);
      if (!out) {
        std::fprintf(stderr, "ddp_step: cannot write %s\n", flags.json.c_str());
        return 1;
      }
    }
    return 0;
  }
  std::fprintf(stderr, "ddp_step: a child failed (see its stderr above)\n");
  return 1;
}
