// syncline-bench-raw-ucx: UCP called directly, the reference for Syncline's
// ucx backend on 2 ranks.
//
// What it measures is the floor under any collective built on UCP's tag API
// on this machine, with none of Syncline's layers (core, C ABI, Work,
// schedules, flight recorder), f32, 2 ranks:
//   - allreduce, sum: at or below 8 KiB one exchange of the whole vector and
//     a sum (what recursive doubling does on 2 ranks); above, reduce-scatter
//     + allgather over halves (what the ring does on 2 ranks), each half one
//     UCP message, so UCX's own rendezvous protocol (cma on one host) moves
//     the bytes;
//   - allgather: one exchange of each rank's block (the output is 2 blocks);
//   - reduce_scatter, sum, out of place: one exchange of the half the other
//     rank keeps, and a sum of the half this rank keeps;
//   - broadcast from rank 0: one message of the whole buffer;
//   - 8-byte ping-pong, half a round trip: UCX's one-way latency.
// On 2 ranks each of these is the least traffic the op can move, one
// message per direction, so Syncline / raw-ucx splits a gap to OpenMPI into
// the transport's part and Syncline's.
// Progress is a busy loop of ucp_worker_progress, the fastest UCP allows.
// The context and worker are configured like the backend's (tag feature,
// UCX_* variables honoured). The two ranks are this process and a child
// forked before UCX starts (no threads exist yet, so fork is safe); worker
// addresses travel over a socketpair. Sizes, iterations and rows follow
// bench/common; times are the slower rank's.
//
// Usage:
//   syncline-bench-raw-ucx [--ops=allreduce,allgather,reduce_scatter,broadcast]
//       [--min_bytes=8] [--max_bytes=64M] [--factor=4] [--warmup=2]
//       [--warmup_ms=20] [--repetitions=5] [--json=FILE]
#include <sys/socket.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/help.h"

namespace syncline::bench {
namespace {

constexpr size_t kSmallMax = 8 << 10;

struct Flags {
  std::vector<Op> ops = {Op::kAllreduce, Op::kAllgather, Op::kReduceScatter,
                         Op::kBroadcast};
  SizeSchedule sizes;
  int warmup = 2;
  double warmup_ms = kDefaultWarmupMs;
  int repetitions = 5;
  std::string json;
};

// --help, in the layout of syncline-run's (tools/cli).
bool PrintHelpIfAsked(int argc, char** argv) {
  cli::Usage usage;
  usage.program = "syncline-bench-raw-ucx";
  usage.description =
      "UCP called directly, the reference for Syncline's ucx backend on 2 ranks: the "
      "floor under any allreduce, allgather, reduce_scatter or broadcast built on "
      "UCP's tag API on this machine, and UCX's "
      "one-way latency (8-byte ping-pong). Sizes, iterations and rows follow "
      "bench/common.";
  std::vector<cli::Option> options = {
      {"--ops=LIST", "", "Of allreduce, allgather, reduce_scatter, broadcast.",
       "allreduce,allgather,reduce_scatter,broadcast"}};
  AppendSharedOptions({"min_bytes", "max_bytes", "factor", "warmup", "warmup_ms", "repetitions",
                       "json"},
                      &options);
  return cli::PrintHelpIfAsked(argc, argv, usage, options);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--ops") {
      flags.ops.clear();
      for (const std::string& name : SplitList(value)) {
        auto op = ParseOp(name);
        if (!op || (*op != Op::kAllreduce && *op != Op::kAllgather &&
                    *op != Op::kReduceScatter && *op != Op::kBroadcast)) {
          std::fprintf(stderr, "raw-ucx: op %s is not measured here\n", name.c_str());
          std::exit(2);
        }
        flags.ops.push_back(*op);
      }
    } else if (key == "--min_bytes" || key == "--max_bytes") {
      auto bytes = ParseBytes(value);
      if (!bytes) {
        std::fprintf(stderr, "raw-ucx: bad size %s\n", value.c_str());
        std::exit(2);
      }
      (key == "--min_bytes" ? flags.sizes.min_bytes : flags.sizes.max_bytes) = *bytes;
    } else if (key == "--factor") {
      flags.sizes.factor = std::max(2, std::atoi(value.c_str()));
    } else if (key == "--warmup") {
      flags.warmup = std::max(1, std::atoi(value.c_str()));
    } else if (key == "--warmup_ms") {
      flags.warmup_ms = std::atof(value.c_str());
    } else if (key == "--repetitions") {
      flags.repetitions = std::max(1, std::atoi(value.c_str()));
    } else if (key == "--json") {
      flags.json = value;
    } else {
      std::fprintf(stderr,
                   "usage: syncline-bench-raw-ucx "
                   "[--ops=allreduce,allgather,reduce_scatter,broadcast] [--min_bytes=8] "
                   "[--max_bytes=64M] [--factor=4] [--warmup=2] [--warmup_ms=20] [--repetitions=5] "
                   "[--json=FILE]\n");
      std::exit(2);
    }
  }
  return flags;
}

[[noreturn]] void Die(const char* what, ucs_status_t status) {
  std::fprintf(stderr, "raw-ucx: %s: %s\n", what, ucs_status_string(status));
  std::exit(1);
}

void WriteAll(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::write(fd, p, len);
    if (n <= 0) {
      std::perror("raw-ucx: write");
      std::exit(1);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void ReadAll(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t n = ::read(fd, p, len);
    if (n <= 0) {
      std::fprintf(stderr, "raw-ucx: the other rank went away\n");
      std::exit(1);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

// One rank's UCP state: context, worker, and the endpoint to the other rank.
class Peer {
 public:
  Peer(int rank, int sock) : rank_(rank), sock_(sock) {
    ucp_config_t* config = nullptr;
    ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
    if (status != UCS_OK) Die("ucp_config_read", status);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    status = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (status != UCS_OK) Die("ucp_init", status);
    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(context_, &wparams, &worker_);
    if (status != UCS_OK) Die("ucp_worker_create", status);
    ucp_address_t* address = nullptr;
    size_t length = 0;
    status = ucp_worker_get_address(worker_, &address, &length);
    if (status != UCS_OK) Die("ucp_worker_get_address", status);
    const uint64_t len64 = length;
    WriteAll(sock_, &len64, sizeof(len64));
    WriteAll(sock_, address, length);
    ucp_worker_release_address(worker_, address);
    uint64_t peer_len = 0;
    ReadAll(sock_, &peer_len, sizeof(peer_len));
    std::vector<char> peer(peer_len);
    ReadAll(sock_, peer.data(), peer.size());
    ucp_ep_params_t eparams{};
    eparams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    eparams.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    status = ucp_ep_create(worker_, &eparams, &ep_);
    if (status != UCS_OK) Die("ucp_ep_create", status);
  }

  ~Peer() {
    ucp_request_param_t param{};  // a flushing close: both ranks are done
    Wait(ucp_ep_close_nbx(ep_, &param), "ucp_ep_close_nbx");
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
  }

  int rank() const { return rank_; }
  int sock() const { return sock_; }

  // Sends `send_bytes` to the other rank and receives `recv_bytes` into
  // `recv_buf`, both posted at once; returns when both are done (busy
  // progress).
  void Exchange(const void* send_buf, size_t send_bytes, void* recv_buf,
                size_t recv_bytes) {
    ucp_request_param_t param{};
    void* recv = ucp_tag_recv_nbx(worker_, recv_buf, recv_bytes, 0, 0, &param);
    void* send = ucp_tag_send_nbx(ep_, send_buf, send_bytes, 0, &param);
    Wait(recv, "ucp_tag_recv_nbx");
    Wait(send, "ucp_tag_send_nbx");
  }
  void Send(const void* buf, size_t bytes) {
    ucp_request_param_t param{};
    Wait(ucp_tag_send_nbx(ep_, buf, bytes, 0, &param), "ucp_tag_send_nbx");
  }
  void Recv(void* buf, size_t bytes) {
    ucp_request_param_t param{};
    Wait(ucp_tag_recv_nbx(worker_, buf, bytes, 0, 0, &param), "ucp_tag_recv_nbx");
  }

 private:
  void Wait(void* request, const char* what) {
    if (request == nullptr) return;
    if (UCS_PTR_IS_ERR(request)) Die(what, UCS_PTR_STATUS(request));
    ucs_status_t status;
    while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
      ucp_worker_progress(worker_);
    }
    ucp_request_free(request);
    if (status != UCS_OK) Die(what, status);
  }

  const int rank_;
  const int sock_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
};

void Sum(float* inout, const float* in, size_t n) {
  for (size_t i = 0; i < n; ++i) inout[i] += in[i];
}

// 2-rank allreduce of `n` floats in place, as described at the top.
void Allreduce(Peer& peer, float* buf, float* tmp, size_t n) {
  const size_t bytes = n * sizeof(float);
  if (bytes <= kSmallMax) {
    peer.Exchange(buf, bytes, tmp, bytes);
    Sum(buf, tmp, n);
    return;
  }
  const size_t half0 = n / 2;
  float* mine = peer.rank() == 0 ? buf : buf + half0;
  float* theirs = peer.rank() == 0 ? buf + half0 : buf;
  const size_t my_n = peer.rank() == 0 ? half0 : n - half0;
  const size_t their_n = n - my_n;
  // Reduce-scatter: their half of my vector leaves, my half of theirs
  // arrives in tmp and is summed into mine.
  peer.Exchange(theirs, their_n * sizeof(float), tmp, my_n * sizeof(float));
  Sum(mine, tmp, my_n);
  // Allgather: my reduced half leaves; theirs lands in place.
  peer.Exchange(mine, my_n * sizeof(float), theirs, their_n * sizeof(float));
}

// 2-rank allgather: `block` floats of this rank's input (in place, at its
// block of `out`) to the same block of the other rank's `out`.
void Allgather(Peer& peer, float* out, size_t block) {
  float* mine = out + peer.rank() * block;
  float* theirs = out + (1 - peer.rank()) * block;
  peer.Exchange(mine, block * sizeof(float), theirs, block * sizeof(float));
}

// 2-rank reduce_scatter, out of place: `in` holds 2 blocks of `block`
// floats; this rank's block of the sum lands in `out`.
void ReduceScatter(Peer& peer, const float* in, float* out, float* tmp, size_t block) {
  const float* mine = in + peer.rank() * block;
  const float* theirs = in + (1 - peer.rank()) * block;
  peer.Exchange(theirs, block * sizeof(float), tmp, block * sizeof(float));
  for (size_t i = 0; i < block; ++i) out[i] = mine[i] + tmp[i];
}

// Broadcast of `n` floats from rank 0, in place.
void Broadcast(Peer& peer, float* buf, size_t n) {
  if (peer.rank() == 0) {
    peer.Send(buf, n * sizeof(float));
  } else {
    peer.Recv(buf, n * sizeof(float));
  }
}

// Inputs: element i of rank r is (r + 1) * (i % 7 + 1), small integers, so
// the sum (3 * (i % 7 + 1)) is exact in f32.
float Input(int rank, size_t i) { return static_cast<float>((rank + 1) * (i % 7 + 1)); }
void Fill(float* buf, size_t n, int rank) {
  for (size_t i = 0; i < n; ++i) buf[i] = Input(rank, i);
}
void Scribble(float* buf, size_t n) { std::fill(buf, buf + n, -1.0f); }

// One op on `n` floats (nccl-tests' count: the largest buffer), on buffers
// that the caller allocated for the largest size.
struct OpBuffers {
  std::vector<float> in, out, tmp;
};

// Prepares the inputs of `op` and scribbles its output.
void Prepare(Op op, int rank, size_t n, OpBuffers& b) {
  switch (op) {
    case Op::kAllreduce:
      Fill(b.out.data(), n, rank);  // in place
      break;
    case Op::kAllgather:
      Scribble(b.out.data(), n);  // this rank's block is its input, element
      for (size_t i = 0; i < n / 2; ++i) b.out[rank * (n / 2) + i] = Input(rank, i);
      break;
    case Op::kReduceScatter:
      Fill(b.in.data(), n, rank);
      Scribble(b.out.data(), n / 2);
      break;
    default:  // broadcast from rank 0, in place
      if (rank == 0) {
        Fill(b.out.data(), n, 0);
      } else {
        Scribble(b.out.data(), n);
      }
  }
}

void RunOp(Peer& peer, Op op, size_t n, OpBuffers& b) {
  switch (op) {
    case Op::kAllreduce:
      Allreduce(peer, b.out.data(), b.tmp.data(), n);
      break;
    case Op::kAllgather:
      Allgather(peer, b.out.data(), n / 2);
      break;
    case Op::kReduceScatter:
      ReduceScatter(peer, b.in.data(), b.out.data(), b.tmp.data(), n / 2);
      break;
    default:
      Broadcast(peer, b.out.data(), n);
  }
}

// Elements of this rank's output that differ from what `op` must give.
int64_t CountWrong(Op op, int rank, size_t n, const OpBuffers& b) {
  int64_t wrong = 0;
  switch (op) {
    case Op::kAllreduce:
      for (size_t i = 0; i < n; ++i) wrong += b.out[i] != 3 * Input(0, i);
      break;
    case Op::kAllgather:
      for (size_t i = 0; i < n; ++i) wrong += b.out[i] != Input(i / (n / 2), i % (n / 2));
      break;
    case Op::kReduceScatter:
      for (size_t i = 0; i < n / 2; ++i)
        wrong += b.out[i] != 3 * Input(0, rank * (n / 2) + i);
      break;
    default:
      for (size_t i = 0; i < n; ++i) wrong += b.out[i] != Input(0, i);
  }
  return wrong;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Both ranks run this; returns rank 0's rows (times are the slower rank's).
// The first warm-up of the first repetition is checked on both ranks, and
// so are the last repetition's timed ops (but allreduce's, see below).
std::vector<Row> Run(Peer& peer, const Flags& flags) {
  std::vector<Row> rows;
  const std::vector<size_t> sizes = Sizes(flags.sizes);
  const size_t max_n = flags.sizes.max_bytes / sizeof(float) + 1;
  OpBuffers b{std::vector<float>(max_n), std::vector<float>(max_n),
              std::vector<float>(max_n)};
  for (Op op : flags.ops) {
    for (size_t bytes : sizes) {
      size_t n = std::max<size_t>(1, bytes / sizeof(float));
      if (op == Op::kAllgather || op == Op::kReduceScatter)
        n = std::max<size_t>(2, n / 2 * 2);
      const int iters = IterationsFor(bytes);
      std::vector<double> reps;
      int64_t wrong = 0;
      for (int rep = 0; rep < flags.repetitions; ++rep) {
        for (int w = 0; w < flags.warmup; ++w) {
          Prepare(op, peer.rank(), n, b);
          RunOp(peer, op, n, b);
          if (rep == 0 && w == 0) wrong += CountWrong(op, peer.rank(), n, b);
        }
        // The last repetition's timed ops start from a scribbled output and
        // are checked after (their inputs stay intact, so any of them must
        // leave the right output); an allreduce in place goes on summing, so
        // only its warm-up is checked.
        const bool check_last = rep == flags.repetitions - 1 && op != Op::kAllreduce;
        if (check_last) Prepare(op, peer.rank(), n, b);
        WarmFor(
            flags.warmup_ms, [&] { RunOp(peer, op, n, b); },
            [&](bool done) {
              char mine = done, other = 0;
              WriteAll(peer.sock(), &mine, 1);
              ReadAll(peer.sock(), &other, 1);
              return mine && other;
            });
        const auto start = std::chrono::steady_clock::now();
        for (int it = 0; it < iters; ++it) RunOp(peer, op, n, b);
        double mine = SecondsSince(start) / iters;
        if (check_last) wrong += CountWrong(op, peer.rank(), n, b);
        // The slower rank's time, and the wrong count of both.
        double other = 0;
        int64_t other_wrong = 0;
        WriteAll(peer.sock(), &mine, sizeof(mine));
        WriteAll(peer.sock(), &wrong, sizeof(wrong));
        ReadAll(peer.sock(), &other, sizeof(other));
        ReadAll(peer.sock(), &other_wrong, sizeof(other_wrong));
        reps.push_back(std::max(mine, other));
        if (rep == flags.repetitions - 1) wrong += other_wrong;
      }
      Row row;
      row.system = "raw-ucx";
      row.op = OpName(op);
      row.dtype = "f32";
      row.redop = op == Op::kAllgather || op == Op::kBroadcast ? "none" : "sum";
      row.ranks = 2;
      row.bytes = n * sizeof(float);
      row.count = n;
      row.time_us = Median(reps) * 1e6;
      row.samples_us = reps;
      for (double& t : row.samples_us) t *= 1e6;
      row.wrong = wrong;
      ComputeBandwidth(&row);
      rows.push_back(row);
    }
  }
  return rows;
}

// Half a round trip of an 8-byte message, median over repetitions, in us.
double PingPongUs(Peer& peer, const Flags& flags) {
  char message[8] = {};
  constexpr int kIters = 20000;
  std::vector<double> reps;
  for (int rep = 0; rep < flags.repetitions; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kIters; ++i) {
      if (peer.rank() == 0) {
        peer.Send(message, sizeof(message));
        peer.Recv(message, sizeof(message));
      } else {
        peer.Recv(message, sizeof(message));
        peer.Send(message, sizeof(message));
      }
    }
    reps.push_back(SecondsSince(start) / kIters / 2 * 1e6);
  }
  return Median(reps);
}

}  // namespace
}  // namespace syncline::bench

int main(int argc, char** argv) {
  using namespace syncline::bench;
  if (PrintHelpIfAsked(argc, argv)) return 0;
  const Flags flags = ParseFlags(argc, argv);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    std::perror("raw-ucx: socketpair");
    return 1;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("raw-ucx: fork");
    return 1;
  }
  const int rank = child == 0 ? 1 : 0;
  ::close(fds[rank == 0 ? 1 : 0]);
  std::vector<Row> rows;
  double pingpong_us = 0;
  {
    Peer peer(rank, fds[rank]);
    pingpong_us = PingPongUs(peer, flags);
    rows = Run(peer, flags);
    int done = 1;  // both ranks finished every transfer before closing
    WriteAll(peer.sock(), &done, sizeof(done));
    ReadAll(peer.sock(), &done, sizeof(done));
  }
  if (rank == 1) std::_Exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "raw-ucx: rank 1 failed\n");
    return 1;
  }
  std::printf(
      "# raw-ucx: UCP tag API, 2 ranks, busy progress; 8 B ping-pong %.2f us one way\n",
      pingpong_us);
  std::printf("%s\n", TableHeader().c_str());
  int64_t wrong = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    if (i == 0 || rows[i - 1].op != row.op) std::printf("# %s\n", row.op.c_str());
    std::printf("%s\n", TableLine(row).c_str());
    wrong += row.wrong;
  }
  if (!flags.json.empty()) {
    Row pp;
    pp.system = "raw-ucx-pingpong";
    pp.op = "pingpong";
    pp.dtype = "u8";
    pp.redop = "none";
    pp.ranks = 2;
    pp.bytes = 8;
    pp.count = 8;
    pp.time_us = pingpong_us;
    rows.push_back(pp);
    if (!WriteRowsJson(flags.json, "syncline-bench-raw-ucx", rows)) {
      std::fprintf(stderr, "raw-ucx: cannot write %s\n", flags.json.c_str());
      return 1;
    }
  }
  return wrong == 0 ? 0 : 3;
}
