/* syncline-bench-mpi: OpenMPI's allreduce, allgather, broadcast and
 * reduce_scatter (MPI_Reduce_scatter_block, sum), the reference for Syncline
 * on one host.
 *
 * Run it under mpirun; the BTL chooses the transport:
 *   mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 \
 *       --mca btl vader,self syncline-bench-mpi --system=mpi-shm
 *   mpirun ... --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
 *       syncline-bench-mpi --system=mpi-tcp
 * It follows bench/common's rules in C: sizes from max down by a factor to
 * min (both included), about 16 MiB per repetition (3 to 100
 * iterations), warm-ups first (the first one checked, then untimed ops
 * until every rank has run them for --warmup_ms), the median over
 * repetitions of the slowest rank's mean time, nccl-tests' columns and bus
 * factors, and rows as JSON (--json, written by rank 0).
 *
 * Usage: syncline-bench-mpi [--system=mpi]
 *            [--ops=allreduce,allgather,broadcast,reduce_scatter]
 *            [--min_bytes=8] [--max_bytes=64M] [--factor=4] [--warmup=2]
 *            [--warmup_ms=20] [--repetitions=5] [--json=FILE] [--nonblocking]
 * --nonblocking runs MPI_Iallreduce, MPI_Iallgather, MPI_Ibcast and
 * MPI_Ireduce_scatter_block, each followed by MPI_Wait. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kAllreduce = 0, kAllgather = 1, kBroadcast = 2, kReduceScatter = 3, kNumOps = 4 };
static const char* const kOpNames[kNumOps] = {"allreduce", "allgather", "broadcast",
                                              "reduce_scatter"};

struct Flags {
  const char* system;
  int ops[kNumOps];
  size_t min_bytes, max_bytes;
  int factor, warmup, repetitions;
  double warmup_ms;
  const char* json;
  int nonblocking;
};

static size_t ParseBytes(const char* text) {
  char* end = NULL;
  size_t value = strtoull(text, &end, 10);
  if (*end == 'K' || *end == 'k') value <<= 10;
  if (*end == 'M') value <<= 20;
  if (*end == 'G') value <<= 30;
  return value;
}

static int IterationsFor(size_t bytes) {
  double iters = 16.0 * (1 << 20) / (double)(bytes ? bytes : 1);
  if (iters < 3) iters = 3;
  if (iters > 100) iters = 100;
  return (int)iters;
}

static double BusFactor(int op, int n) {
  if (op == kBroadcast) return 1.0;
  if (op == kAllreduce) return 2.0 * (n - 1) / n;
  return (double)(n - 1) / n;
}

static float InputValue(int rank, size_t i) { return (float)((i * 5 + (size_t)rank * 3 + 1) % 8); }

static int CompareDoubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double Median(double* values, int n) {
  qsort(values, n, sizeof(double), CompareDoubles);
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* --nonblocking: the same ops through MPI's non-blocking collectives
 * (OpenMPI 4.1: coll/libnbc) and MPI_Wait, the calls Syncline's mpi backend
 * makes, so that syncline-mpi / this row is the backend's own cost. */
static void RunOpNonblocking(int op, float* send, float* recv, size_t count, int n) {
  MPI_Request req;
  if (op == kAllreduce) {
    MPI_Iallreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
  } else if (op == kAllgather) {
    MPI_Iallgather(send, (int)(count / n), MPI_FLOAT, recv, (int)(count / n), MPI_FLOAT,
                   MPI_COMM_WORLD, &req);
  } else if (op == kReduceScatter) {
    MPI_Ireduce_scatter_block(send, recv, (int)(count / n), MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD, &req);
  } else {
    MPI_Ibcast(recv, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD, &req);
  }
  MPI_Wait(&req, MPI_STATUS_IGNORE);
}

static int g_nonblocking = 0;

static void RunOp(int op, float* send, float* recv, size_t count, int n) {
  if (g_nonblocking) {
    RunOpNonblocking(op, send, recv, count, n);
    return;
  }
  if (op == kAllreduce) {
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (op == kAllgather) {
    MPI_Allgather(send, (int)(count / n), MPI_FLOAT, recv, (int)(count / n), MPI_FLOAT,
                  MPI_COMM_WORLD);
  } else if (op == kReduceScatter) {
    MPI_Reduce_scatter_block(send, recv, (int)(count / n), MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD);
  } else {
    MPI_Bcast(recv, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
}

/* reduce_scatter's output is this rank's block of the sum: block elements. */
static long CountWrong(int op, int rank, int n, const float* recv, size_t count) {
  long wrong = 0;
  size_t block = count / (size_t)n;
  size_t outputs = op == kReduceScatter ? block : count;
  for (size_t i = 0; i < outputs; ++i) {
    float want = 0;
    if (op == kAllreduce) {
      for (int r = 0; r < n; ++r) want += InputValue(r, i);
    } else if (op == kReduceScatter) {
      for (int r = 0; r < n; ++r) want += InputValue(r, (size_t)rank * block + i);
    } else if (op == kAllgather) {
      want = InputValue((int)(i / block), i % block);
    } else {
      want = InputValue(0, i);
    }
    if (recv[i] != want) ++wrong;
  }
  return wrong;
}

/* Untimed ops until every rank has run them for `ms` milliseconds, in chunks
 * of 1, 2, 4, ... with an agreement after each (bench/common's WarmFor): the
 * ops right after a compute phase (the check above) run slower for some
 * milliseconds on this VM. */
static void WarmFor(double ms, int op, float* send, float* recv, size_t count, int n) {
  if (ms <= 0) return;
  double start = MPI_Wtime();
  for (long chunk = 1;; chunk *= 2) {
    for (long i = 0; i < chunk; ++i) RunOp(op, send, recv, count, n);
    int done = (MPI_Wtime() - start) * 1e3 >= ms, all = 0;
    MPI_Allreduce(&done, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) return;
  }
}

/* --help, rendered once in the layout that tools/cli gives the C++ programs
 * (a C program cannot link it); tests/tools/help_test checks its usage line
 * and options as it checks theirs. */
static const char kHelp[] =
    "usage: syncline-bench-mpi [-h] [--system=NAME] [--ops=LIST] [--min_bytes=BYTES]\n"
    "                         [--max_bytes=BYTES] [--factor=N] [--warmup=N]\n"
    "                         [--warmup_ms=MS] [--repetitions=N] [--json=FILE]\n"
    "                         [--nonblocking]\n"
    "\n"
    "OpenMPI's allreduce, allgather, broadcast and reduce_scatter, the reference for\n"
    "Syncline on one host, following bench/common's rules (sizes, iterations,\n"
    "nccl-tests' columns). Run it under mpirun; the BTL chooses the transport.\n"
    "\n"
    "options:\n"
    "  -h, --help            show this help message and exit\n"
    "  --system=NAME         The system name in the rows, e.g. mpi-shm or mpi-tcp.\n"
    "                        (default: mpi)\n"
    "  --ops=LIST            Of allreduce, allgather, broadcast, reduce_scatter.\n"
    "                        (default: allreduce,allgather,broadcast,reduce_scatter)\n"
    "  --min_bytes=BYTES     Smallest message size (8, 4K, 64M, 1G). (default: 8)\n"
    "  --max_bytes=BYTES     Largest message size. (default: 64M)\n"
    "  --factor=N            Sizes run down from max_bytes, divided by N each time.\n"
    "                        (default: 4)\n"
    "  --warmup=N            Untimed ops per repetition; the first one is checked.\n"
    "                        (default: 2)\n"
    "  --warmup_ms=MS        Then untimed ops until every rank has run them for MS\n"
    "                        milliseconds (0: none). (default: 20)\n"
    "  --repetitions=N       Repetitions per row; the row is their median. (default:\n"
    "                        5)\n"
    "  --json=FILE           Also write every row to FILE as JSON.\n"
    "  --nonblocking         Use the non-blocking collectives (MPI_Iallreduce, ...)\n"
    "                        and MPI_Wait, as Syncline's mpi backend does.\n"
    "\n"
    "Example: mpirun -np 2 --mca pml ob1 --mca btl vader,self syncline-bench-mpi\n"
    "--system=mpi-shm\n";

static int HelpAsked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--")) break;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
  }
  return 0;
}

static void ParseFlags(int argc, char** argv, struct Flags* f) {
  f->system = "mpi";
  for (int k = 0; k < kNumOps; ++k) f->ops[k] = 1;
  f->min_bytes = 8;
  f->max_bytes = (size_t)64 << 20;
  f->factor = 4;
  f->warmup = 2;
  f->warmup_ms = 20;
  f->repetitions = 5;
  f->json = NULL;
  f->nonblocking = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strncmp(a, "--system=", 9)) f->system = a + 9;
    else if (!strncmp(a, "--min_bytes=", 12)) f->min_bytes = ParseBytes(a + 12);
    else if (!strncmp(a, "--max_bytes=", 12)) f->max_bytes = ParseBytes(a + 12);
    else if (!strncmp(a, "--factor=", 9)) f->factor = atoi(a + 9);
    else if (!strncmp(a, "--warmup=", 9)) f->warmup = atoi(a + 9);
    else if (!strncmp(a, "--warmup_ms=", 12)) f->warmup_ms = atof(a + 12);
    else if (!strncmp(a, "--repetitions=", 14)) f->repetitions = atoi(a + 14);
    else if (!strncmp(a, "--json=", 7)) f->json = a + 7;
    else if (!strcmp(a, "--nonblocking")) f->nonblocking = 1;
    else if (!strncmp(a, "--ops=", 6)) {
      for (int k = 0; k < kNumOps; ++k) f->ops[k] = strstr(a + 6, kOpNames[k]) != NULL;
    } else {
      fprintf(stderr, "syncline-bench-mpi: unknown flag %s (see the file comment)\n", a);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (f->factor < 2) f->factor = 2;
  if (f->warmup < 1) f->warmup = 1;
  if (f->repetitions < 1) f->repetitions = 1;
  if (f->repetitions > 64) f->repetitions = 64;
}

int main(int argc, char** argv) {
  if (HelpAsked(argc, argv)) { /* before MPI_Init: no mpirun needed */
    fputs(kHelp, stdout);
    return 0;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  struct Flags f;
  ParseFlags(argc, argv, &f);
  g_nonblocking = f.nonblocking;
  size_t max_count = f.max_bytes / sizeof(float) + (size_t)n + 1;
  float* send = calloc(max_count, sizeof(float));
  float* recv = calloc(max_count, sizeof(float));
  FILE* json = NULL;
  if (rank == 0 && f.json) {
    json = fopen(f.json, "w");
    if (!json) fprintf(stderr, "syncline-bench-mpi: cannot write %s\n", f.json);
    else fprintf(json, "{\"program\": \"syncline-bench-mpi\", \"rows\": [\n");
  }
  int first_row = 1;
  long total_wrong = 0;
  for (int op = 0; op < kNumOps; ++op) {
    if (!f.ops[op]) continue;
    if (rank == 0) {
      printf("\n# %s, %d ranks, %s, f32\n#%14s %12s %6s %6s %10s %8s %8s %7s\n", f.system, n,
             kOpNames[op], "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong");
    }
    size_t sizes[64];
    int num_sizes = 0;
    for (size_t b = f.max_bytes > f.min_bytes ? f.max_bytes : f.min_bytes;
         b > f.min_bytes && num_sizes < 63; b /= (size_t)f.factor) {
      sizes[num_sizes++] = b;
    }
    sizes[num_sizes++] = f.min_bytes;
    for (int s = num_sizes - 1; s >= 0; --s) {
      size_t bytes = sizes[s];
      size_t count = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
      if (op == kAllgather || op == kReduceScatter) {
        count = (count / n ? count / n : 1) * (size_t)n;
      }
      size_t inputs = op == kAllgather ? count / n : count;
      for (size_t i = 0; i < inputs; ++i) send[i] = InputValue(rank, i);
      if (op == kBroadcast && rank == 0) memcpy(recv, send, count * sizeof(float));
      int iters = IterationsFor(count * sizeof(float));
      double reps[65];
      long wrong = 0;
      for (int rep = 0; rep < f.repetitions; ++rep) {
        if (op != kBroadcast || rank != 0) {
          for (size_t i = 0; i < count; ++i) recv[i] = -1.0f;
        }
        RunOp(op, send, recv, count, n);
        wrong += CountWrong(op, rank, n, recv, count);
        for (int w = 1; w < f.warmup; ++w) RunOp(op, send, recv, count, n);
        WarmFor(f.warmup_ms, op, send, recv, count, n);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int it = 0; it < iters; ++it) RunOp(op, send, recv, count, n);
        reps[rep] = (MPI_Wtime() - start) * 1e6 / iters;
      }
      wrong += CountWrong(op, rank, n, recv, count);
      reps[f.repetitions] = (double)wrong;
      double slowest[65];
      MPI_Allreduce(reps, slowest, f.repetitions, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      long wrong_all = 0;
      MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      total_wrong += wrong_all;
      double time_us = Median(slowest, f.repetitions);
      double algbw = (double)(count * sizeof(float)) / time_us / 1e3;
      double busbw = algbw * BusFactor(op, n);
      const char* redop = op == kAllreduce || op == kReduceScatter ? "sum" : "none";
      if (rank == 0) {
        printf(" %14zu %12zu %6s %6s %10.2f %8.3f %8.3f %7ld\n", count * sizeof(float), count,
               "f32", redop, time_us, algbw, busbw, wrong_all);
        fflush(stdout);
        if (json) {
          fprintf(json,
                  "%s  {\"system\": \"%s\", \"op\": \"%s\", \"dtype\": \"f32\", \"redop\": "
                  "\"%s\", \"ranks\": %d, \"bytes\": %zu, \"count\": %zu, \"time_us\": %.4f, "
                  "\"algbw\": %.6f, \"busbw\": %.6f, \"wrong\": %ld}",
                  first_row ? "" : ",\n", f.system, kOpNames[op], redop, n,
                  count * sizeof(float), count, time_us, algbw, busbw, wrong_all);
          first_row = 0;
        }
      }
    }
  }
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return total_wrong > 0;
}
