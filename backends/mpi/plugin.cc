// plugin.cc: the MPI backend's entry point and C function table, built by
// the plugin SDK's adapter (syncline/plugin_sdk/plugin_table.h).
//
// Capabilities: every op, every dtype and every reduction on every dtype
// (f16/bf16 reduced by the SDK's kernels inside user-defined MPI ops), host
// memory only. Sub-groups split with MPI_Comm_split.
#include <string>

#include "communicator.h"
#include "runtime.h"
#include "work.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/plugin_table.h"

namespace syncline::mpi_backend {
namespace {

// "syncline-mpi 0.1 (Open MPI v4.1.4, ...)": the MPI library loaded.
const char* Version() {
  static const std::string version = "syncline-mpi 0.1 (" + LibraryVersion() + ")";
  return version.c_str();
}

}  // namespace
}  // namespace syncline::mpi_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
  static constexpr char kName[] = "mpi";
  using syncline::mpi_backend::Communicator;
  return syncline::backend::PublishBackend<Communicator, kName>(
      {syncline::backend::Capabilities::AllOps(SL_DEVICE_CPU),
       syncline::mpi_backend::Version(),
       &syncline::backend::Adapter<Communicator, kName>::CommSplit});
}
