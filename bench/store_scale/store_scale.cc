// store_scale.cc: Syncline's rendezvous at many simulated ranks.
//
// One process plays a share of a job's ranks, one thread each, against a
// TcpStore on 127.0.0.1. run.py starts the store (--serve) and a few of
// these workers, then starts them all at once, so that the store sees
// every rank arrive together, as at a job's start.
//
//   --serve [--world N]        host a job's TcpStoreServer for N ranks on a
//                              free port, print "port <p>", serve until
//                              stdin closes
//   --port P --world N --first F --count C [--per-check-in K]
//                              ranks [F, F+C) of a world of N: print
//                              "ready", wait for a line on stdin, then each
//                              thread connects (ConnectTcpStore) and checks
//                              in (RendezvousCheckIn). With K > 1, as under
//                              syncline-run: one thread per K ranks (the
//                              node's launcher) connects and checks in for
//                              all K, and only then do its K ranks connect,
//                              as workers told SYNCLINE_NODE_CHECKED_IN=1
//                              do; print "done <connected_ns> <done_ns>
//                              <errors>" with the latest CLOCK_MONOTONIC
//                              times of either phase (done: every rank holds
//                              a store of a job that has met), and the
//                              first error if any.
// The clients stay open until every thread is done, as a job's would.
#include <algorithm>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "syncline/rendezvous.h"
#include "syncline/tcp_store.h"
#include "tools/cli/usage.h"

namespace {

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Hosts the store as a job's host does (JobStoreOptions: its connection cap
// sized for `world`), not with the defaults: under syncline-run every rank
// connects while the node leaders still hold theirs.
int Serve(int world) {
  auto options = syncline::JobStoreOptions("127.0.0.1", 0, world, "");
  if (!options.ok()) {
    std::fprintf(stderr, "store_scale: %s\n", std::string(options.status().message()).c_str());
    return 1;
  }
  auto server = syncline::TcpStoreServer::Start(*options);
  if (!server.ok()) {
    std::fprintf(stderr, "store_scale: cannot start the store: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("port %d\n", (*server)->port());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}

struct Args {
  int port = 0, world = 0, first = 0, count = 0, per_check_in = 1;
};

int RunRanks(const Args& a) {
  const int k = a.per_check_in;
  const int nodes = a.count / k;
  const absl::Duration timeout = absl::Seconds(600);
  const syncline::TcpStoreClientOptions client_options = [&] {
    syncline::TcpStoreClientOptions o;
    o.host = "127.0.0.1";
    o.port = a.port;
    o.connect_timeout = timeout;
    return o;
  }();
  absl::Notification go;
  std::vector<absl::Notification> met(nodes);  // a node's check-in is over
  std::vector<absl::Status> node_status(nodes);
  std::atomic<int64_t> connected_ns{0}, done_ns{0};
  std::atomic<int> errors{0};
  std::mutex mu;
  std::string first_error;
  std::vector<std::shared_ptr<syncline::Store>> clients(a.count + nodes);
  auto latest = [](std::atomic<int64_t>& at, int64_t t) {
    int64_t seen = at.load();
    while (t > seen && !at.compare_exchange_weak(seen, t)) {
    }
  };
  auto fail = [&](const absl::Status& status) {
    errors.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty()) first_error = std::string(status.message());
  };
  // Checks in `count` ranks from `rank` on a connection of its own; `slot`
  // keeps that connection open until every thread is done.
  auto check_in = [&](int rank, int count, int slot) -> absl::Status {
    syncline::RendezvousInfo info;
    info.rank = rank;
    info.world_size = a.world;
    info.check_in_ranks = count;
    info.job_id = "store-scale";
    info.job_id_source = "bench";
    auto client = syncline::ConnectTcpStore(client_options);
    latest(connected_ns, MonotonicNs());
    if (!client.ok()) return client.status();
    clients[slot] = *client;
    return syncline::RendezvousCheckIn(**client, info, timeout);
  };
  std::vector<std::thread> pool;
  if (k > 1) {
    for (int n = 0; n < nodes; ++n) {  // the launchers
      pool.emplace_back([&, n] {
        go.WaitForNotification();
        node_status[n] = check_in(a.first + n * k, k, a.count + n);
        met[n].Notify();
      });
    }
  }
  for (int i = 0; i < a.count; ++i) {
    pool.emplace_back([&, i] {
      go.WaitForNotification();
      absl::Status status;
      if (k == 1) {
        status = check_in(a.first + i, 1, i);
      } else {
        met[i / k].WaitForNotification();
        status = node_status[i / k];
        if (status.ok()) {  // a worker of a node that has met: connect only
          auto client = syncline::ConnectTcpStore(client_options);
          latest(connected_ns, MonotonicNs());
          status = client.status();
          if (client.ok()) clients[i] = *client;
        }
      }
      latest(done_ns, MonotonicNs());
      if (!status.ok()) fail(status);
    });
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);
  go.Notify();
  for (auto& t : pool) t.join();
  std::printf("done %lld %lld %d %s\n", static_cast<long long>(connected_ns.load()),
              static_cast<long long>(done_ns.load()), errors.load(),
              first_error.substr(0, 300).c_str());
  std::fflush(stdout);
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  syncline::cli::Usage usage;
  usage.program = "syncline-bench-store-scale";
  usage.description =
      "Syncline's rendezvous at many simulated ranks: one process plays ranks "
      "[F, F+C) of a world of N, one thread each, against a TcpStore on 127.0.0.1. "
      "bench/store_scale/run.py starts the store (--serve) and a few of these workers, "
      "then releases them all at once.";
  usage.epilog =
      "A worker prints \"ready\", waits for a line on stdin, connects and checks in, "
      "then prints \"done <connected_ns> <checked_in_ns> <errors>\".";
  const std::vector<syncline::cli::Option> options = {
      {"--serve", "", "Host a job's TcpStoreServer (sized for --world) on a free port, "
       "print \"port <p>\", serve until stdin closes.", ""},
      {"--port", "P", "The store's port (a worker).", ""},
      {"--world", "N", "The world size (a worker, or the store's job).", ""},
      {"--first", "F", "The first rank this process plays.", "0"},
      {"--count", "C", "How many ranks this process plays (a multiple of K).", ""},
      {"--per-check-in", "K", "Ranks per check-in (a node leader when K > 1).", "1"},
  };
  if (syncline::cli::PrintHelpIfAsked(argc, argv, usage, options)) return 0;
  Args a;
  bool serve = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--serve") {
      serve = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const int value = std::atoi(argv[++i]);
    if (flag == "--port") a.port = value;
    else if (flag == "--world") a.world = value;
    else if (flag == "--first") a.first = value;
    else if (flag == "--count") a.count = value;
    else if (flag == "--per-check-in") a.per_check_in = value;
  }
  if (serve) return Serve(std::max(a.world, 1));
  if (a.port <= 0 || a.world <= 0 || a.count <= 0 || a.per_check_in <= 0 ||
      a.count % a.per_check_in != 0) {
    std::fprintf(stderr,
                 "usage: %s --serve [--world N] | --port P --world N --first F --count C "
                 "[--per-check-in K] (C a multiple of K)\n",
                 argv[0]);
    return 2;
  }
  return RunRanks(a);
}
