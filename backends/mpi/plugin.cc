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

sl_backend_v1_t MakeTable() {
  sl_backend_v1_t table = backend::MakeBackendTable<Traits>();
  static const std::string version = "syncline-mpi 0.1 (" + LibraryVersion() + ")";
  table.version = version.c_str();
  table.comm_split = &backend::PluginAdapter<Traits>::CommSplit;
  const uint32_t all_dtypes = (1u << SL_DTYPE_COUNT) - 1;
  table.caps.device_mask = 1u << SL_DEVICE_CPU;
  table.caps.op_mask = (1u << SL_OP_KIND_COUNT) - 1;
  table.caps.dtype_mask = all_dtypes;
  for (uint32_t& mask : table.caps.reduce_dtype_mask) mask = all_dtypes;
  return table;
}

}  // namespace
}  // namespace syncline::mpi_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_v1_t* syncline_backend_plugin_v1(void) {
  static const sl_backend_v1_t table = syncline::mpi_backend::MakeTable();
  return &table;
}
