// nccl_vs_raw: allreduce busbw and latency through Syncline's NCCL backend
// against raw ncclAllReduce, on the same device buffer and the same CUDA
// stream, alternating between the two so that clock and thermal drift hit
// both alike. Output follows nccl-tests: size, count, dtype, time (us),
// algbw and busbw (GB/s, busbw = algbw * 2(n-1)/n), for each path, plus:
//   pipelined  `iters` ops issued back to back, one host wait at the end;
//   latency    one op, then a host wait (Work::Wait / cudaStreamSynchronize).
// Exits 1 when the budget is missed: Syncline's busbw at 64 MiB
// below 97% of raw, or more than 5 us added to an 8-byte op's latency.
//
//   syncline-run -n <GPUs> build/bin/nccl_vs_raw [--iters 50] [--max-mb 64]
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "syncline/communicator.h"
#include "syncline/rendezvous.h"
#include "tools/cli/usage.h"

namespace {

using Clock = std::chrono::steady_clock;

#define CHECK_OR_DIE(cond, ...)                          \
  do {                                                   \
    if (!(cond)) {                                       \
      std::fprintf(stderr, "nccl_vs_raw: " __VA_ARGS__); \
      std::fprintf(stderr, "\n");                        \
      std::exit(2);                                      \
    }                                                    \
  } while (0)

struct Timing {
  double pipelined_us = 1e30;  // per op, best repetition
  double latency_us = 1e30;
};

double Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// Runs `op` (which issues one allreduce) `iters` times back to back, then
// `wait_all`; and then `iters` times op + `wait_one`. op(true) must keep
// what wait_one/wait_all wait for.
template <typename Op, typename WaitOne, typename WaitAll>
void Measure(int iters, Op op, WaitOne wait_one, WaitAll wait_all, Timing* t) {
  auto start = Clock::now();
  for (int i = 0; i < iters; ++i) op(i == iters - 1);
  wait_all();
  t->pipelined_us = std::min(t->pipelined_us, Micros(start, Clock::now()) / iters);
  start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    op(true);
    wait_one();
  }
  t->latency_us = std::min(t->latency_us, Micros(start, Clock::now()) / iters);
}

}  // namespace

int main(int argc, char** argv) {
  syncline::cli::Usage usage;
  usage.program = "nccl_vs_raw";
  usage.description =
      "Allreduce busbw and latency through Syncline's NCCL backend against raw "
      "ncclAllReduce, on the same device buffer and CUDA stream, alternating between "
      "the two. Exits 1 when Syncline's busbw at 64 MiB is below 97% of raw, or it adds "
      "more than 5 us to an 8-byte op's latency. Needs a GPU per rank.";
  usage.epilog = "Example: syncline-run -n 2 build/bin/nccl_vs_raw --iters 50";
  const std::vector<syncline::cli::Option> flags = {
      {"--iters", "N", "Ops per pipelined measurement.", "50"},
      {"--max-mb", "MB", "Largest message, in MiB.", "64"},
  };
  if (syncline::cli::PrintHelpIfAsked(argc, argv, usage, flags)) return 0;
  int iters = 50;
  size_t max_bytes = size_t{64} << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--max-mb") == 0) {
      max_bytes = static_cast<size_t>(std::atof(argv[i + 1]) * (1 << 20));
    }
  }
  auto info = syncline::ResolveRendezvous(-1, -1);
  CHECK_OR_DIE(info.ok(), "%s", info.status().ToString().c_str());
  int gpus = 0;
  CHECK_OR_DIE(cudaGetDeviceCount(&gpus) == cudaSuccess && gpus > 0,
               "no CUDA device is visible; this benchmark needs a GPU");
  const int device = info->local_rank % gpus;
  CHECK_OR_DIE(cudaSetDevice(device) == cudaSuccess, "cudaSetDevice(%d) failed", device);

  syncline::CommunicatorOptions options;
  options.backend = "nccl";
  options.device = syncline::Device::Cuda(device);
  auto comm = syncline::Communicator::Create(options);
  CHECK_OR_DIE(comm.ok(), "%s", comm.status().ToString().c_str());
  const int rank = (*comm)->rank();
  const int size = (*comm)->size();

  // The raw communicator bootstraps through the same store.
  ncclUniqueId id;
  if (rank == 0) {
    CHECK_OR_DIE(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId failed");
    CHECK_OR_DIE(
        (*comm)->store()->Set("bench/raw_uid", std::string(id.internal, sizeof(id))).ok(),
        "store set failed");
  }
  auto uid = (*comm)->store()->Get("bench/raw_uid", absl::Seconds(60));
  CHECK_OR_DIE(uid.ok() && uid->size() == sizeof(id), "no raw NCCL id from rank 0");
  std::memcpy(id.internal, uid->data(), sizeof(id));
  ncclComm_t raw = nullptr;
  CHECK_OR_DIE(ncclCommInitRank(&raw, size, id, rank) == ncclSuccess,
               "raw ncclCommInitRank failed");

  cudaStream_t stream = nullptr;
  CHECK_OR_DIE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
               "cudaStreamCreate failed");
  void* buffer = nullptr;
  CHECK_OR_DIE(cudaMalloc(&buffer, std::max<size_t>(max_bytes, 8)) == cudaSuccess,
               "cudaMalloc(%zu) failed", max_bytes);
  CHECK_OR_DIE(cudaMemset(buffer, 0, std::max<size_t>(max_bytes, 8)) == cudaSuccess,
               "cudaMemset failed");

  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  const double bus_factor = 2.0 * (size - 1) / size;  // 0 on one rank, as nccl-tests
  if (rank == 0) {
    std::printf(
        "# nccl_vs_raw: allreduce f32 sum, %d rank(s), cuda:%d, NCCL %d, %d iters\n",
        size, device, nccl_version, iters);
    std::printf("# %10s %10s %5s | %9s %8s %8s | %9s %8s %8s | %6s | %8s %8s %8s\n",
                "size(B)", "count", "type", "raw_us", "algbw", "busbw", "sl_us", "algbw",
                "busbw", "ratio", "raw_lat", "sl_lat", "added");
  }
  bool budget_met = true;
  std::vector<size_t> sizes;
  for (size_t bytes :
       {size_t{8}, size_t{64}, size_t{1} << 10, size_t{16} << 10, size_t{256} << 10,
        size_t{1} << 20, size_t{4} << 20, size_t{16} << 20, size_t{64} << 20}) {
    if (bytes <= max_bytes) sizes.push_back(bytes);
  }
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    syncline::BufferView view =
        syncline::View(buffer, count, syncline::DataType::kFloat32, options.device);
    view.stream = stream;
    Timing raw_t, sl_t;
    std::vector<std::unique_ptr<syncline::Work>> works;
    for (int rep = 0; rep < 3; ++rep) {  // rep 0 warms up both paths
      Measure(
          iters,
          [&](bool) {
            CHECK_OR_DIE(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, raw,
                                       stream) == ncclSuccess,
                         "ncclAllReduce failed");
          },
          [&] { cudaStreamSynchronize(stream); }, [&] { cudaStreamSynchronize(stream); },
          &raw_t);
      Measure(
          iters,
          [&](bool keep) {
            auto work = (*comm)->Allreduce(view);
            CHECK_OR_DIE(work.ok(), "%s", work.status().ToString().c_str());
            if (keep) works.push_back(std::move(work).value());
          },
          [&] {
            CHECK_OR_DIE(works.back()->Wait().ok(), "syncline allreduce failed");
            works.clear();
          },
          [&] {
            CHECK_OR_DIE(works.back()->Wait().ok(), "syncline allreduce failed");
            works.clear();
          },
          &sl_t);
      if (rep == 0) raw_t = sl_t = Timing();  // discard the warm-up
    }
    const double gb = static_cast<double>(bytes) / 1e9;
    const double raw_alg = gb / (raw_t.pipelined_us * 1e-6);
    const double sl_alg = gb / (sl_t.pipelined_us * 1e-6);
    const double ratio = sl_alg / raw_alg;
    const double added = sl_t.latency_us - raw_t.latency_us;
    if (rank == 0) {
      std::printf(
          "  %10zu %10zu %5s | %9.2f %8.3f %8.3f | %9.2f %8.3f %8.3f | %6.3f | %8.2f "
          "%8.2f %8.2f\n",
          bytes, count, "f32", raw_t.pipelined_us, raw_alg, raw_alg * bus_factor,
          sl_t.pipelined_us, sl_alg, sl_alg * bus_factor, ratio, raw_t.latency_us,
          sl_t.latency_us, added);
    }
    if (bytes == 8 && added > 5.0) budget_met = false;
    if (bytes == (size_t{64} << 20) && ratio < 0.97) budget_met = false;
  }
  if (rank == 0) {
    std::printf("# budget (busbw >= 97%% of raw at 64 MiB, <= 5 us added at 8 B): %s\n",
                budget_met ? "met" : "MISSED");
  }
  cudaFree(buffer);
  cudaStreamDestroy(stream);
  ncclCommDestroy(raw);
  return budget_met ? 0 : 1;
}
