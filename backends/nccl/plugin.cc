// plugin.cc: the NCCL backend's entry point and C function table.
//
// libsyncline-backend-nccl.so exports exactly one symbol,
// SL_BACKEND_ENTRY (syncline_backend_plugin_v2), which returns the table the
// plugin SDK's adapter makes (syncline/plugin_sdk/plugin_table.h) from this
// backend's classes.
//
// Loading the plugin touches no GPU: it needs libnccl.so.2 and libcudart
// (found through the RPATH set at build time), and nothing else until
// comm_create. On a machine without a GPU it therefore loads, reports its
// capabilities, and fails comm_create with SL_ERR_UNAVAILABLE.
//
// Capabilities: every op; the eight ABI dtypes (NCCL has all of them,
// including bf16); every reduction, AVG included (ncclAvg), on every dtype;
// CUDA buffers only.
//
// Beyond syncline/plugin_sdk/plugin_table.h's entries, this table fills the two
// optional ones (both the SDK adapter's, over this backend's classes):
//   comm_split           ncclCommSplit (split.cc), when built against NCCL
//                        2.18 or newer; NULL before, so that the core builds
//                        sub-groups with comm_create (a fresh NCCL comm
//                        bootstrapped through the store).
//   request_stream_wait  the caller's stream waits on the op's completion
//                        event without blocking the host (work.h).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>

#include "backends/nccl/communicator.h"
#include "backends/nccl/ops.h"
#include "backends/nccl/work.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/plugin_table.h"

namespace syncline::nccl_backend {
namespace {

// "syncline-nccl 0.1 (NCCL 2.28.9, CUDA runtime 13.0)": the versions loaded
// at run time, which the core compares across ranks. Neither call needs a GPU.
const char* VersionString() {
  static char text[128];
  int nccl = 0;
  int cuda = 0;
  if (ncclGetVersion(&nccl) != ncclSuccess) nccl = 0;
  if (cudaRuntimeGetVersion(&cuda) != cudaSuccess) cuda = 0;
  std::snprintf(text, sizeof(text),
                "syncline-nccl 0.1 (NCCL %d.%d.%d, CUDA runtime %d.%d)", nccl / 10000,
                (nccl % 10000) / 100, nccl % 100, cuda / 1000, (cuda % 1000) / 10);
  return text;
}

}  // namespace
}  // namespace syncline::nccl_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
  static constexpr char kName[] = "nccl";
  using syncline::nccl_backend::Communicator;
  using Adapter = syncline::backend::Adapter<Communicator, kName>;
  syncline::backend::BackendInfo info;
  info.caps = syncline::backend::Capabilities::AllOps(
      SL_DEVICE_CUDA, syncline::nccl_backend::SupportedDtypeMask());
  info.version = syncline::nccl_backend::VersionString();
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  info.comm_split = &Adapter::CommSplit;
#endif
  info.request_stream_wait = &Adapter::RequestStreamWait;
  return syncline::backend::PublishBackend<Communicator, kName>(info);
}
