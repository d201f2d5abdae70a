#include "runtime.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::mpi_backend {
namespace {

using backend::SlSetError;

std::once_flag init_once;
sl_result_t init_result = SL_OK;
std::string init_error;
std::atomic<int> thread_level{MPI_THREAD_SINGLE};
bool we_initialized = false;
std::atomic<bool> skip_finalize{false};
std::atomic<int> live_communicators{0};
std::mutex serial_mu;

MPI_Datatype f16_type = MPI_DATATYPE_NULL;
MPI_Datatype bf16_type = MPI_DATATYPE_NULL;
MPI_Op half_ops[SL_REDOP_COUNT];

sl_dtype_t HalfDtype(MPI_Datatype* type) {
  return *type == bf16_type ? SL_BF16 : SL_F16;
}

// User-defined MPI ops: inout = in (op) inout, with the SDK's kernels.
template <sl_redop_t kOp>
void HalfReduce(void* in, void* inout, int* len, MPI_Datatype* type) {
  backend::SlReduceInto(inout, in, static_cast<size_t>(*len), HalfDtype(type), kOp);
}

void FinalizeAtExit() {
  if (skip_finalize.load() || live_communicators.load() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void Init() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    init_result = SL_ERR_UNAVAILABLE;
    init_error = "MPI was already finalized in this process; the mpi backend needs MPI "
                 "initialized (let it initialize MPI, or call MPI_Finalize only after the "
                 "last mpi communicator is destroyed)";
    return;
  }
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      init_result = SL_ERR_UNAVAILABLE;
      init_error = "MPI_Init_thread failed: " + MpiErrorText(rc);
      return;
    }
    we_initialized = true;
    std::atexit(FinalizeAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  thread_level.store(provided);
  MpiLock lock;
  MPI_Type_contiguous(2, MPI_BYTE, &f16_type);
  MPI_Type_commit(&f16_type);
  MPI_Type_contiguous(2, MPI_BYTE, &bf16_type);
  MPI_Type_commit(&bf16_type);
  MPI_Op_create(&HalfReduce<SL_SUM>, /*commute=*/1, &half_ops[SL_SUM]);
  MPI_Op_create(&HalfReduce<SL_PROD>, 1, &half_ops[SL_PROD]);
  MPI_Op_create(&HalfReduce<SL_MIN>, 1, &half_ops[SL_MIN]);
  MPI_Op_create(&HalfReduce<SL_MAX>, 1, &half_ops[SL_MAX]);
  half_ops[SL_AVG] = half_ops[SL_SUM];
  // Errors come back as codes (for the messages), not as a job abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

}  // namespace

sl_result_t EnsureMpi(sl_error_t* err) {
  std::call_once(init_once, Init);
  if (init_result != SL_OK) return SlSetError(err, init_result, "mpi: %s", init_error.c_str());
  return SL_OK;
}

int ThreadLevel() { return thread_level.load(); }

MpiLock::MpiLock() : held_(thread_level.load() < MPI_THREAD_MULTIPLE) {
  if (held_) serial_mu.lock();
}

MpiLock::~MpiLock() {
  if (held_) serial_mu.unlock();
}

MPI_Datatype MpiType(sl_dtype_t dtype) {
  switch (dtype) {
    case SL_F32: return MPI_FLOAT;
    case SL_F64: return MPI_DOUBLE;
    case SL_F16: return f16_type;
    case SL_BF16: return bf16_type;
    case SL_I8: return MPI_INT8_T;
    case SL_U8: return MPI_UINT8_T;
    case SL_I32: return MPI_INT32_T;
    case SL_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op MpiOp(sl_redop_t op, sl_dtype_t dtype) {
  if (dtype == SL_F16 || dtype == SL_BF16) return half_ops[op];
  switch (op) {
    case SL_SUM: case SL_AVG: return MPI_SUM;
    case SL_PROD: return MPI_PROD;
    case SL_MIN: return MPI_MIN;
    case SL_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
  }
}

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, len) + " (MPI error " + std::to_string(code) + ")";
}

void SkipFinalizeAtExit() { skip_finalize.store(true); }

void CommunicatorCreated() { live_communicators.fetch_add(1); }
void CommunicatorDestroyed() { live_communicators.fetch_sub(1); }

std::string LibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string version(text, len);
  const size_t end = version.find_first_of(",\n");
  return end == std::string::npos ? version : version.substr(0, end);
}

}  // namespace syncline::mpi_backend
