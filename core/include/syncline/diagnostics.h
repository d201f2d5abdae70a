// diagnostics.h: what Syncline can find on this machine, for syncline-doctor
// and for error messages.
//
// Example:
//   for (const auto& b : syncline::ProbeBackends()) {
//     std::cout << b.name << (b.loaded ? " ok " : " unavailable: ") << b.detail;
//   }
#ifndef SYNCLINE_DIAGNOSTICS_H_
#define SYNCLINE_DIAGNOSTICS_H_

#include <cstdint>
#include <string>
#include <vector>

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

struct BackendProbe {
  std::string name;     // "gloo"
  bool loaded = false;  // the plugin loaded and its table is valid
  std::string detail;   // version string when loaded, else why not
  uint32_t abi_version = 0;
  std::vector<std::string> devices;  // "cpu", "cuda"
};

// Tries to load every backend found on the search path plus the known names
// (gloo, ucx, nccl), and says for each why it is or is not usable: the probes
// of BackendNames(), in that order.
std::vector<BackendProbe> ProbeBackends();

// The names ProbeBackends() tries: the tree's backends, whether or not they
// are installed, and any other plugin found on the search path, sorted.
std::vector<std::string> BackendNames();

// Loads one backend (it stays loaded: its library's constructors run in this
// process) and says why it is or is not usable. A tool that must not hang on
// a library that hangs while loading calls it in a child process, as
// syncline-doctor does.
BackendProbe ProbeBackend(const std::string& name);

// The plugin search path, in order.
std::vector<std::string> PluginSearchPaths();

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_DIAGNOSTICS_H_
