// plugin.cc: the UCX backend's entry point and C function table.
//
// libsyncline-backend-ucx.so exports exactly one symbol,
// SL_BACKEND_ENTRY (syncline_backend_plugin_v2), which returns a static
// sl_backend_t. Each
// entry unwraps the opaque handle, runs the C++ implementation under
// SlGuard (no exception crosses the ABI) and returns the result code.
//
// Capabilities: CPU buffers; every op, every dtype, every reduction on
// every dtype (reductions use the plugin SDK's kernels). comm_split is
// set: a split child shares its parent's worker and endpoints and gets a
// tag space of its own (communicator.h, transport.h).
#include <memory>

#include "backends/ucx/communicator.h"
#include "backends/ucx/work.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/plugin_table.h"

namespace syncline::ucx_backend {
namespace {

// The adapter entries are syncline/plugin_sdk/plugin_table.h's, over these classes.
struct Traits {
  using Communicator = syncline::ucx_backend::Communicator;
  using Handle = sl_request;  // defined in work.h
  static constexpr char kName[] = "ucx";
};

#define SL_STR_INNER(x) #x
#define SL_STR(x) SL_STR_INNER(x)

sl_backend_t MakeTable() {
  sl_backend_t table =
      backend::MakeBackendTable<Traits>(backend::Capabilities::AllOps(SL_DEVICE_CPU));
  table.version = "syncline-ucx 0.1 (built against UCX " SL_STR(UCP_API_MAJOR) "." SL_STR(
      UCP_API_MINOR) ", UCP tag API)";
  table.comm_split = &backend::PluginAdapter<Traits>::CommSplit;
  return table;
}

}  // namespace
}  // namespace syncline::ucx_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
  static const sl_backend_t table = syncline::ucx_backend::MakeTable();
  return &table;
}
