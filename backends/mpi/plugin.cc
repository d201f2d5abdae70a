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

struct Traits {
  using Communicator = syncline::mpi_backend::Communicator;
  using Handle = sl_request;  // defined in work.h
  static constexpr char kName[] = "mpi";
};

sl_backend_t MakeTable() {
  sl_backend_t table = backend::MakeBackendTable<Traits>(
      backend::Capabilities::AllOps(SL_DEVICE_CPU));
  static const std::string version = "syncline-mpi 0.1 (" + LibraryVersion() + ")";
  table.version = version.c_str();
  table.comm_split = &backend::PluginAdapter<Traits>::CommSplit;
  return table;
}

}  // namespace
}  // namespace syncline::mpi_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
  static const sl_backend_t table = syncline::mpi_backend::MakeTable();
  return &table;
}
