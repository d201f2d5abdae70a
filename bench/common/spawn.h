// spawn.h: start a benchmark's ranks as real processes.
//
// A benchmark program that is its own launcher re-executes itself once per
// rank with fork+exec (posix_spawn of /proc/self/exe), never with a bare
// fork: the child starts with a fresh address space, so no lock held by a
// thread of the parent (a store server, a transport) can deadlock it.
//
// Thread safety: call from the launching thread only.
//
// Example:
//   std::vector<pid_t> pids;
//   for (int r = 0; r < n; ++r) {
//     pids.push_back(SpawnSelf(args, {"SYNCLINE_RANK=" + std::to_string(r)}));
//   }
//   std::string why;
//   if (!WaitAll(pids, 600, &why)) std::fprintf(stderr, "%s\n", why.c_str());
#ifndef SYNCLINE_BENCH_COMMON_SPAWN_H_
#define SYNCLINE_BENCH_COMMON_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace syncline::bench {

// SpawnSelf()
//
// Starts this executable with `args` (not including argv[0]) and the current
// environment plus `extra_env` ("NAME=value", overriding same-named ones).
// stdout is kept for `show_stdout`, and sent to /dev/null otherwise; stderr
// is always kept. Returns the pid, or -1 (with a message on stderr).
pid_t SpawnSelf(const std::vector<std::string>& args,
                const std::vector<std::string>& extra_env, bool show_stdout);

// WaitAll()
//
// Waits for every pid up to `timeout_s` seconds, then SIGKILLs those left.
// True when all exited with status 0; otherwise `why` says who did not.
bool WaitAll(const std::vector<pid_t>& pids, double timeout_s, std::string* why);

// LaunchRanksInTempDir()
//
// The launcher of a program whose ranks meet through files: makes a fresh
// folder under /tmp, starts `world_size` copies of this program with argv's
// flags plus --rank=<r> and <dir_flag>=<folder> (rank 0's stdout shown),
// waits up to 900 s, and removes the folder. `name` prefixes messages.
// Returns the exit status for main(): 0 when every rank succeeded.
int LaunchRanksInTempDir(const char* name, int world_size, const std::string& dir_flag,
                         int argc, char** argv);

}  // namespace syncline::bench

#endif  // SYNCLINE_BENCH_COMMON_SPAWN_H_
