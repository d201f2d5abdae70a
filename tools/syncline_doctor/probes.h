// probes.h: the facts syncline-doctor gathers, each independent of the rest.
#ifndef SYNCLINE_TOOLS_SYNCLINE_DOCTOR_PROBES_H_
#define SYNCLINE_TOOLS_SYNCLINE_DOCTOR_PROBES_H_

#include <string>
#include <utility>
#include <vector>

namespace syncline::doctor {

// A library found (or not) by dlopen, and the version it reports: those no
// backend stands for (the CUDA runtime, libtorch); backends report their
// transport's version themselves (syncline/diagnostics.h). Each loads the
// library into this process: the doctor calls them through RunIsolated.
struct LibraryProbe {
  std::string name;     // "CUDA runtime"
  bool found = false;
  std::string version;  // or why it was not found
};
LibraryProbe ProbeCudaRuntime();
LibraryProbe ProbeLibtorch();

struct Interface {
  std::string name;
  std::string address;
  bool loopback = false;
};
std::vector<Interface> ProbeInterfaces();

// The local address the kernel would use to reach `host` (no packet is sent:
// a UDP socket is connected, not written to), or an explanation.
std::string RouteTo(const std::string& host);

// SYNCLINE_*, NCCL_*, UCX_*, GLOO_* variables in effect, sorted.
std::vector<std::pair<std::string, std::string>> RelevantEnvironment();

// Whether a Syncline store answers at host:port (connect + handshake).
std::string ProbeStore(const std::string& host, int port);

}  // namespace syncline::doctor

#endif  // SYNCLINE_TOOLS_SYNCLINE_DOCTOR_PROBES_H_
