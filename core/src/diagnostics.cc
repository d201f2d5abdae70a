// diagnostics.cc: backend probing over the loader.
#include "syncline/diagnostics.h"

#include <set>

#include "backend_catalog.h"
#include "loader.h"

namespace syncline {

std::vector<std::string> BackendNames() {
  // The tree's backends even when missing, and any other plugin found.
  std::set<std::string> names(internal::KnownBackends().begin(), internal::KnownBackends().end());
  for (const std::string& n : internal::AvailableBackends()) names.insert(n);
  return {names.begin(), names.end()};
}

BackendProbe ProbeBackend(const std::string& name) {
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
  return probe;
}

std::vector<BackendProbe> ProbeBackends() {
  std::vector<BackendProbe> probes;
  for (const std::string& name : BackendNames()) probes.push_back(ProbeBackend(name));
  return probes;
}

std::vector<std::string> PluginSearchPaths() { return internal::PluginSearchPath(); }

}  // namespace syncline
