// A plugin built for a future ABI version the loader must refuse.
#include "syncline/plugin_abi.h"

extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY() {
  static sl_backend_t table = {};
  table.abi_version = 99;
  table.struct_size = sizeof(table);
  table.name = "wrongabi";
  return &table;
}
