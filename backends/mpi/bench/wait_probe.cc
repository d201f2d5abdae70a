// wait_probe.cc: how the way an MPI request is completed costs a large
// message, apart from Syncline (issue 16: are the backend's large ops slower
// than raw MPI's because request_wait spins on MPI_Test instead of calling
// MPI_Wait?). Run by wait_probe.sh, which builds it with mpicxx.
//
// Two ranks; rank 0 sends one message of each size to rank 1 (a 2-rank
// broadcast), MPI_Isend/MPI_Irecv, completed by:
//   wait          MPI_Wait (raw MPI's way)
//   test          MPI_Test in a loop, sched_yield every 64 tests (the
//                 backend's request_wait, backends/mpi/work.cc)
//   testnoyield   MPI_Test in a loop, no yield
// under MPI_Init (argv[1] 0) or MPI_Init_thread(MPI_THREAD_MULTIPLE) (1, the
// backend's level). Prints per size the best of 5 repetitions' mean time.
//
// Usage: wait_probe THREAD_MULTIPLE(0|1) MODE MIN_BYTES  (sizes MIN.. 64 MiB, x4)
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: wait_probe 0|1 wait|test|testnoyield MIN_BYTES\n");
    return 2;
  }
  const bool multiple = std::atoi(argv[1]) != 0;
  const bool test = std::strncmp(argv[2], "test", 4) == 0;
  const bool yield = std::strcmp(argv[2], "test") == 0;
  int provided = 0;
  if (multiple) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (size_t bytes = std::atol(argv[3]); bytes <= (size_t{64} << 20); bytes *= 4) {
    std::vector<char> buffer(bytes, 1);
    const int iters = static_cast<int>(
        std::max<size_t>(3, std::min<size_t>(100, (size_t{16} << 20) / bytes)));
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {
        MPI_Request request;
        if (rank == 0) {
          MPI_Isend(buffer.data(), static_cast<int>(bytes), MPI_CHAR, 1, 0,
                    MPI_COMM_WORLD, &request);
        } else {
          MPI_Irecv(buffer.data(), static_cast<int>(bytes), MPI_CHAR, 0, 0,
                    MPI_COMM_WORLD, &request);
        }
        if (!test) {
          MPI_Wait(&request, MPI_STATUS_IGNORE);
          continue;
        }
        for (unsigned spins = 0;; ++spins) {
          int done = 0;
          MPI_Test(&request, &done, MPI_STATUS_IGNORE);
          if (done) break;
          if (yield && (spins & 63) == 63) sched_yield();
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      const std::chrono::duration<double, std::micro> took =
          std::chrono::steady_clock::now() - start;
      best = std::min(best, took.count() / iters);
    }
    if (rank == 0) {
      std::printf("%s %s %zu %.1f\n", multiple ? "multiple" : "single", argv[2], bytes,
                  best);
    }
  }
  MPI_Finalize();
  return 0;
}
