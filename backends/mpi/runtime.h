// runtime.h: the process-wide side of the MPI backend: initializing MPI once,
// the thread level it gave, and the mapping of the ABI's dtypes and reduce
// ops onto MPI's.
//
// MPI is initialized by the first comm_create (MPI_Init_thread asking for
// MPI_THREAD_MULTIPLE), unless the program initialized it itself; then the
// program owns it. When MPI gives less than MPI_THREAD_MULTIPLE, every MPI
// call of this backend runs under one process-wide lock (Serialized()).
// MPI_Finalize runs at exit (atexit) when this backend initialized MPI, every
// communicator was destroyed, and none was left with an op MPI still holds
// (after a timeout or an abort): finalizing then could block on the op
// forever.
//
// f16 and bf16 have no MPI datatype in OpenMPI 4.1: they travel as 2-byte
// derived types, reduced by user-defined MPI ops that run the plugin SDK's
// kernels (syncline/plugin_sdk/reduce.h), so they round as every other
// backend does. AVG is SUM followed by SlDivideBy on the result.
//
// Thread safety: every function may be called from any thread.
#ifndef SYNCLINE_BACKENDS_MPI_RUNTIME_H_
#define SYNCLINE_BACKENDS_MPI_RUNTIME_H_

#include <mpi.h>

#include <mutex>
#include <string>

#include "syncline/plugin_abi.h"

namespace syncline::mpi_backend {

// Initializes MPI if nobody has (once per process). SL_OK, or an error with
// the reason (MPI already finalized, MPI_Init_thread failed).
sl_result_t EnsureMpi(sl_error_t* err);

// The thread level MPI provided (MPI_THREAD_*), after EnsureMpi.
int ThreadLevel();

// A lock every MPI call takes: a real one when MPI is not
// MPI_THREAD_MULTIPLE, a no-op otherwise.
class MpiLock {
 public:
  MpiLock();
  ~MpiLock();
  MpiLock(const MpiLock&) = delete;
  MpiLock& operator=(const MpiLock&) = delete;

 private:
  bool held_;
};

// The MPI datatype of `dtype` (a derived 2-byte type for f16 and bf16).
MPI_Datatype MpiType(sl_dtype_t dtype);

// The MPI op for `op` over `dtype`: MPI_SUM/PROD/MIN/MAX for the types MPI
// knows, user-defined ops for f16/bf16; AVG maps to the SUM op.
MPI_Op MpiOp(sl_redop_t op, sl_dtype_t dtype);

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string MpiErrorText(int code);

// Keeps MPI_Finalize from running at exit: an op on some communicator is
// still held by MPI (it timed out or was aborted), and finalizing would wait
// for it.
void SkipFinalizeAtExit();

// Counts the communicators alive: MPI_Finalize is skipped at exit while one
// is (its progress thread may still call into MPI).
void CommunicatorCreated();
void CommunicatorDestroyed();

// "Open MPI v4.1.4, ..." (MPI_Get_library_version, first line).
std::string LibraryVersion();

}  // namespace syncline::mpi_backend

#endif  // SYNCLINE_BACKENDS_MPI_RUNTIME_H_
