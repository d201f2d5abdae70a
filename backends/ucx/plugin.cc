// plugin.cc: the UCX backend's entry point and C function table.
//
// libsyncline-backend-ucx.so exports exactly one symbol,
// SL_BACKEND_ENTRY (syncline_backend_plugin_v2), which returns the table the
// plugin SDK's adapter makes (syncline/plugin_sdk/plugin_table.h) from this
// backend's classes.
//
// Capabilities: CPU buffers; every op, every dtype, every reduction on
// every dtype (reductions use the plugin SDK's kernels). comm_split is
// set: a split child shares its parent's worker and endpoints and gets a
// tag space of its own (communicator.h, transport.h).
#include "backends/ucx/communicator.h"
#include "backends/ucx/work.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/plugin_table.h"

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
  static constexpr char kName[] = "ucx";
  using Communicator = syncline::ucx_backend::Communicator;
  return syncline::backend::PublishBackend<Communicator, kName>(
      {syncline::backend::Capabilities::AllOps(SL_DEVICE_CPU),
       "syncline-ucx 0.1 (built against UCX " SL_PLUGIN_STR(
           UCP_API_MAJOR) "." SL_PLUGIN_STR(UCP_API_MINOR) ", UCP tag API)",
       &syncline::backend::Adapter<Communicator, kName>::CommSplit});
}
