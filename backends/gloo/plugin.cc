// plugin.cc: the Gloo backend's entry point and C function table.
//
// libsyncline-backend-gloo.so exports exactly one symbol,
// SL_BACKEND_ENTRY (syncline_backend_plugin_v2), which returns a static
// sl_backend_t. Each
// table entry is a thin adapter: it unwraps the opaque handle, runs the C++
// implementation under SlGuard (so no exception crosses the ABI), and
// returns the result code.
//
// Capabilities: every op and every dtype, every reduction on every dtype,
// CPU buffers only.
#include <memory>

#include "backends/gloo/communicator.h"
#include "backends/gloo/work.h"
#include "gloo/config.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/plugin_table.h"

namespace syncline::gloo_backend {
namespace {

// The adapter entries are syncline/plugin_sdk/plugin_table.h's, over these classes.
struct Traits {
  using Communicator = syncline::gloo_backend::Communicator;
  using Handle = sl_request;  // defined in work.h
  static constexpr char kName[] = "gloo";
};

#define SL_STR_INNER(x) #x
#define SL_STR(x) SL_STR_INNER(x)

sl_backend_t MakeTable() {
  sl_backend_t table =
      backend::MakeBackendTable<Traits>(backend::Capabilities::AllOps(SL_DEVICE_CPU));
  table.version = "syncline-gloo 0.1 (gloo " SL_STR(GLOO_VERSION_MAJOR) "." SL_STR(
      GLOO_VERSION_MINOR) "." SL_STR(GLOO_VERSION_PATCH) ", tcp transport)";
  return table;
}

}  // namespace
}  // namespace syncline::gloo_backend

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
  static const sl_backend_t table = syncline::gloo_backend::MakeTable();
  return &table;
}
