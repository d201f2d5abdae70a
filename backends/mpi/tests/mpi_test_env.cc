// mpi_test_env.cc: runs the shared suites' ranks under mpirun.
//
// Linked into the mpi builds of the shared suites. Before main(), it points
// RunRanks() at mpirun (tests/common/multiprocess.h: SYNCLINE_TEST_LAUNCHER)
// unless the environment already names a launcher: every rank of a test is
// then one process of an mpirun job, with MPI traffic over shared memory
// and loopback only (btl self,vader; the runtime's own channel on lo). Two
// OpenMPI settings keep a test's verdict in the test: a rank may end
// without MPI_Finalize (test ranks leave with _exit, and a rank whose
// collective timed out must not finalize), and a rank's nonzero exit does
// not kill the others (every rank's output is reported). Root may run it
// (containers, CI).
#include <cstdlib>

namespace {

const bool kUnderMpirun = [] {
  setenv("SYNCLINE_TEST_LAUNCHER",
         "mpirun --oversubscribe --bind-to none -np {n} --mca btl self,vader "
         "--mca oob_tcp_if_include lo --mca orte_allowed_exit_without_sync 1 "
         "--mca orte_abort_on_non_zero_status 0",
         /*overwrite=*/0);
  setenv("SYNCLINE_TEST_LAUNCHER_RANK_VAR", "OMPI_COMM_WORLD_RANK", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  return true;
}();

}  // namespace
