// multiprocess.h: run a test body on N real processes.
//
// RunRanks() re-executes the current test binary once per rank (fork+exec,
// never a bare fork after threads exist), filtered to the current test, with
// the rendezvous environment set (SYNCLINE_RANK, SYNCLINE_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, MASTER_PORT of a TcpStoreServer the parent hosts).
// In the child, RunRanks() runs `body(rank, size)` and exits with 0 if no
// assertion failed, 1 otherwise. In the parent it waits for every rank (up to
// options.timeout, then SIGKILLs the rest) and returns how each one ended.
// Every process it or RunCommand() starts gets PR_SET_PDEATHSIG(SIGKILL), so
// none outlives a test that a ctest timeout kills.
//
// Under an external launcher: with SYNCLINE_TEST_LAUNCHER set (a command
// prefix, "{n}" standing for the world size, e.g. "mpirun -np {n}
// --oversubscribe") and SYNCLINE_TEST_LAUNCHER_RANK_VAR naming the variable
// in which the launcher gives each process its rank (e.g.
// OMPI_COMM_WORLD_RANK, SLURM_PROCID), RunRanks() starts the ranks as one
// job of that launcher instead of spawning them itself, with the same
// environment (the store is still the parent's; each rank sets its own
// SYNCLINE_RANK and RunOptions::rank_env). Each rank writes its output and
// exit code to a folder the parent reads; a rank that never returns from
// the body (killed, or taken down with the job) has exit_code -1, signal
// SIGKILL, and the launcher's own output appended to its output; every
// rank's `seconds` is the launcher's. This is
// how a backend whose ranks must be started by its transport's launcher
// (MPI) runs the shared suites unchanged.
//
// Call RunRanks() once per test: a child re-runs the test body from its
// start, so it would run the first RunRanks() body in any case.
//
// Example:
//   TEST(Allreduce, Sum) {
//     auto results = RunRanks(4, [](int rank, int size) {
//       auto comm = syncline::Communicator::Create({});
//       ASSERT_TRUE(comm.ok()) << comm.status();
//       ...
//     });
//     ExpectAllSucceeded(results);
//   }
#ifndef SYNCLINE_TESTS_COMMON_MULTIPROCESS_H_
#define SYNCLINE_TESTS_COMMON_MULTIPROCESS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "syncline/store.h"

namespace syncline::testing {

struct RankResult {
  int rank = 0;
  int pid = 0;
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // terminating signal, 0 if it exited
  bool timed_out = false;  // killed by the harness at the deadline
  double seconds = 0;      // wall time until it ended
  std::string output;      // its stdout and stderr, interleaved
};

struct RunOptions {
  absl::Duration timeout = absl::Seconds(90);
  // Extra environment for every rank.
  std::map<std::string, std::string> env;
  // Extra environment for one rank (applied after `env`).
  std::map<int, std::map<std::string, std::string>> rank_env;
  // Host the store in the parent (true) or let rank 0 host it (false; a
  // run whose rank 0 finds the chosen port taken is repeated on another).
  bool host_store = true;
  // With host_store false: the port rank 0 tries first (0: a probed free
  // one). Tests of the retry hand it a port that is already taken.
  int first_port = 0;
};

// True inside a child started by RunRanks().
bool IsChild();

// Runs `body` on `world_size` processes; see the file comment.
std::vector<RankResult> RunRanks(int world_size,
                                 const std::function<void(int, int)>& body,
                                 const RunOptions& options = {});

// Adds a gtest failure (with the rank's output) for each rank that did not
// exit with 0.
void ExpectAllSucceeded(const std::vector<RankResult>& results);

// Runs a command line (via /bin/sh -c) with a deadline; returns its exit code
// (or 128+signal) and output. For tests of the command-line tools.
struct CommandResult {
  int exit_code = -1;
  bool timed_out = false;
  double seconds = 0;
  std::string output;
};
CommandResult RunCommand(const std::string& command,
                         absl::Duration timeout = absl::Seconds(60));

// In a child: a client of the store the parent hosts (MASTER_PORT on
// 127.0.0.1), or null (with a test failure) if there is none.
std::shared_ptr<Store> ConnectJobStore();

// Folder of the built binaries (bin/) and libraries (lib/) of the build tree.
std::string BuildBinDir();
std::string BuildLibDir();

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_COMMON_MULTIPROCESS_H_
