// diagnostics.cc: backend probing over the loader.
#include "syncline/diagnostics.h"

#include <set>

#include "backend_catalog.h"
#include "loader.h"

namespace syncline {

std::vector<BackendProbe> ProbeBackends() {
  // The tree's backends even when missing, and any other plugin found.
  std::set<std::string> names(internal::KnownBackends().begin(), internal::KnownBackends().end());
  for (const std::string& n : internal::AvailableBackends()) names.insert(n);
  std::vector<BackendProbe> probes;
  for (const std::string& name : names) {
    BackendProbe probe;
    probe.name = name;
    auto table = internal::LoadBackend(name);
    if (table.ok()) {
      probe.loaded = true;
      probe.abi_version = (*table)->abi_version;
      probe.detail = (*table)->version ? (*table)->version : "";
      if ((*table)->caps->device_mask & (1u << SL_DEVICE_CPU)) probe.devices.push_back("cpu");
      if ((*table)->caps->device_mask & (1u << SL_DEVICE_CUDA)) probe.devices.push_back("cuda");
    } else {
      probe.detail = std::string(table.status().message());
    }
    probes.push_back(std::move(probe));
  }
  return probes;
}

std::vector<std::string> PluginSearchPaths() { return internal::PluginSearchPath(); }

}  // namespace syncline
