// A plugin whose dependency (libsyncline_test_dep.so) is not on the search path.
#include "syncline/plugin_abi.h"

extern "C" int syncline_test_dep_value();

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY() {
  static sl_backend_t table = {};
  table.abi_version = syncline_test_dep_value() == 42 ? SL_ABI_VERSION : 0;
  return &table;
}
