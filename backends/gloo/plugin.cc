// plugin.cc: the Gloo backend's entry point and C function table.
//
// libsyncline-backend-gloo.so exports exactly one symbol,
// SL_BACKEND_ENTRY (syncline_backend_plugin_v2), which returns the table the
// plugin SDK's adapter makes (syncline/plugin_sdk/plugin_table.h) from this
// backend's classes.
//
// Capabilities: every op and every dtype, every reduction on every dtype,
// CPU buffers only.
#include "backends/gloo/communicator.h"
#include "backends/gloo/work.h"
#include "gloo/config.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/plugin_table.h"

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
  static constexpr char kName[] = "gloo";
  return syncline::backend::PublishBackend<syncline::gloo_backend::Communicator, kName>(
      {syncline::backend::Capabilities::AllOps(SL_DEVICE_CPU),
       "syncline-gloo 0.1 (gloo " SL_PLUGIN_STR(GLOO_VERSION_MAJOR) "." SL_PLUGIN_STR(
           GLOO_VERSION_MINOR) "." SL_PLUGIN_STR(GLOO_VERSION_PATCH) ", tcp transport)"});
}
