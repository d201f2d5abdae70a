// loader.h: finding and opening plugin libraries.
//
// Search order: SYNCLINE_PLUGIN_PATH (colon-separated), the folder that holds
// libsyncline itself (dladdr), then the install folder of the plugins, taken
// relative to that folder (lib/syncline), so a moved install still finds its
// own plugins and never a stale configure-time prefix. Libraries stay loaded
// for the life of the process (their threads may outlive any one
// communicator), so handles live in a process-wide registry.
// Thread safety: all functions may be called from any thread.
#ifndef SYNCLINE_CORE_SRC_LOADER_H_
#define SYNCLINE_CORE_SRC_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "syncline/plugin_abi.h"

namespace syncline::internal {

// The folders searched, in order, without duplicates.
std::vector<std::string> PluginSearchPath();

// Backend names found on the search path (from libsyncline-backend-<name>.so).
std::vector<std::string> AvailableBackends();

// Opens libsyncline-backend-<name>.so and validates its table. The error
// lists every path tried and why each failed, the other backends that load,
// and apart from them the plugin files found that do not load, with why.
absl::StatusOr<const sl_backend_t*> LoadBackend(const std::string& name);

// Wraps `base` in the interposers named (outermost first), e.g. {"trace"}.
absl::StatusOr<const sl_backend_t*> ApplyInterposers(
    const sl_backend_t* base, const std::vector<std::string>& names);

// Checks a table: ABI version, struct size, required entry points.
absl::Status ValidateBackendTable(const sl_backend_t* table,
                                  const std::string& path);

// Validates `table` and returns the table the core should use: `table`
// itself, or, for a plugin built with a shorter sl_backend_t (an older
// plugin_abi.h), a zero-extended copy that lives as long as the process, so
// that the entries appended since read as NULL (plugin_abi.h, version policy).
absl::StatusOr<const sl_backend_t*> AdoptBackendTable(const sl_backend_t* table,
                                                         const std::string& path);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_LOADER_H_
