// syncline-doctor: what Syncline finds on this machine, and why.
//
//   syncline-doctor            human-readable report
//   syncline-doctor --json     the same for machines
//   syncline-run -n 2 -- syncline-doctor
//                              also runs a short allreduce self-test across
//                              the job and prints its bus bandwidth
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "isolated.h"
#include "probes.h"
#include "syncline/communicator.h"
#include "syncline/diagnostics.h"
#include "syncline/rendezvous.h"
#include "tools/cli/usage.h"

ABSL_FLAG(bool, json, false, "Print the report as JSON.");
ABSL_FLAG(int, selftest_mib, 16, "Allreduce size of the self-test, in MiB.");
ABSL_FLAG(int, probe_timeout_s, 20,
          "Seconds each backend or library probe may take before the doctor reports it as "
          "hanging and goes on.");

namespace syncline::doctor {
namespace {

std::string Q(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

// Runs under a launcher: a few timed allreduces across the job.
std::string SelfTest(bool* ran, double* busbw) {
  const char* ws = std::getenv("WORLD_SIZE");
  int world = 0;
  if (ws == nullptr || !absl::SimpleAtoi(ws, &world) || world < 2) return "";
  *ran = true;
  auto comm = Communicator::Create({});
  if (!comm.ok()) return std::string(comm.status().message());
  size_t count = static_cast<size_t>(absl::GetFlag(FLAGS_selftest_mib)) << 18;
  std::vector<float> data(count, 1.0f);
  constexpr int kIters = 5;
  absl::Time start;
  for (int i = 0; i <= kIters; ++i) {
    if (i == 1) start = absl::Now();  // the first is warm-up
    auto w = (*comm)->Allreduce(View(data));
    absl::Status st = w.ok() ? (*w)->Wait() : w.status();
    if (!st.ok()) return std::string(st.message());
  }
  double seconds = absl::ToDoubleSeconds(absl::Now() - start) / kIters;
  int n = (*comm)->size();
  *busbw = count * 4.0 / seconds / 1e9 * 2.0 * (n - 1) / n;
  double expected = 1.0;
  for (int i = 0; i <= kIters; ++i) expected *= n;
  if (data[0] != static_cast<float>(expected)) {
    return absl::StrFormat("wrong result: %g, expected %g", data[0], expected);
  }
  return absl::StrFormat("ok over %s on %d ranks", (*comm)->backend_name(), n);
}

// What the probes that load libraries found, each run in a child process
// (isolated.h): a library that hangs or crashes while loading, or at exit,
// is reported instead of taking the doctor with it.
struct Loaded {
  std::vector<BackendProbe> backends;
  std::vector<LibraryProbe> libs;
  // Per backend, then per library: "hung" or "crashed" when its probe did, else "".
  std::vector<std::string> failed;
};

std::string Problem(const IsolatedResult& r, const std::string& consequence) {
  return absl::StrCat("loading it ", r.why, ": ", consequence,
                      "; `LD_DEBUG=libs syncline-doctor` names the library that was being "
                      "initialized when it stopped");
}

const char* FailedWord(const IsolatedResult& r) {
  return r.outcome == IsolatedResult::Outcome::kHung ? "hung" : "crashed";
}

Loaded ProbeLoaded() {
  std::vector<std::string> names = BackendNames();
  std::vector<IsolatedProbe> probes;
  for (const std::string& name : names) {
    probes.push_back({name, [name] {
                        BackendProbe b = ProbeBackend(name);
                        return std::vector<std::string>{
                            b.loaded ? "1" : "0", b.detail, absl::StrCat(b.abi_version),
                            absl::StrJoin(b.devices, ",")};
                      }});
  }
  for (LibraryProbe (*probe)() : {&ProbeCudaRuntime, &ProbeLibtorch}) {
    probes.push_back({"library", [probe] {
                        LibraryProbe l = probe();
                        return std::vector<std::string>{l.name, l.found ? "1" : "0", l.version};
                      }});
  }
  std::vector<IsolatedResult> results =
      RunIsolated(probes, absl::Seconds(absl::GetFlag(FLAGS_probe_timeout_s)));
  Loaded out;
  const char* kLibraryNames[] = {"CUDA runtime", "libtorch"};
  for (size_t i = 0; i < results.size(); ++i) {
    const IsolatedResult& r = results[i];
    bool answered = r.outcome == IsolatedResult::Outcome::kAnswered;
    if (i < names.size()) {
      BackendProbe b;
      b.name = names[i];
      if (answered && r.fields.size() == 4) {
        b.loaded = r.fields[0] == "1";
        b.detail = r.fields[1];
        b.abi_version = static_cast<uint32_t>(std::strtoul(r.fields[2].c_str(), nullptr, 10));
        if (!r.fields[3].empty()) b.devices = absl::StrSplit(r.fields[3], ',');
        out.failed.emplace_back();
      } else {
        b.detail = Problem(r, absl::StrCat("a job with SYNCLINE_BACKEND=", b.name,
                                           r.outcome == IsolatedResult::Outcome::kHung
                                               ? " would hang at start-up the same way"
                                               : " would die at start-up the same way"));
        out.failed.push_back(FailedWord(r));
      }
      out.backends.push_back(std::move(b));
    } else {
      LibraryProbe l;
      l.name = kLibraryNames[i - names.size()];
      if (answered && r.fields.size() == 3) {
        l.found = r.fields[1] == "1";
        l.version = r.fields[2];
        out.failed.emplace_back();
      } else {
        l.version = Problem(r, absl::StrCat("a program that loads ", l.name, " would ",
                                            r.outcome == IsolatedResult::Outcome::kHung
                                                ? "hang"
                                                : "die",
                                            " the same way"));
        out.failed.push_back(FailedWord(r));
      }
      out.libs.push_back(std::move(l));
    }
  }
  return out;
}

int Main() {
  bool json = absl::GetFlag(FLAGS_json);
  Loaded loaded = ProbeLoaded();  // first: it forks, before any thread starts
  const std::vector<BackendProbe>& backends = loaded.backends;
  const std::vector<LibraryProbe>& libs = loaded.libs;
  const std::vector<std::string>& failed = loaded.failed;
  bool problems = false;
  for (const std::string& f : failed) problems |= !f.empty();
  auto ifaces = ProbeInterfaces();
  auto env = RelevantEnvironment();
  auto rdzv = ResolveRendezvous(-1, -1);
  std::string master = rdzv.ok() ? absl::StrCat(rdzv->master_addr, ":", rdzv->master_port)
                                 : std::string(rdzv.status().message());
  std::string route = rdzv.ok() ? RouteTo(rdzv->master_addr) : "";
  bool has_master = std::getenv("MASTER_ADDR") || std::getenv("SYNCLINE_MASTER_ADDR");
  std::string store = (rdzv.ok() && has_master && std::getenv("MASTER_PORT"))
                          ? ProbeStore(rdzv->master_addr, rdzv->master_port)
                          : "not checked (no MASTER_ADDR/MASTER_PORT)";
  bool ran = false;
  double busbw = 0;
  std::string selftest = SelfTest(&ran, &busbw);
  bool selftest_ok = !ran || selftest.rfind("ok", 0) == 0;
  if (rdzv.ok() && rdzv->rank != 0) return selftest_ok && !problems ? 0 : 1;

  if (json) {
    std::string out = "{\"backends\":[";
    for (size_t i = 0; i < backends.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", "{\"name\":", Q(backends[i].name), ",\"loaded\":",
                      backends[i].loaded ? "true" : "false", ",\"probe\":",
                      Q(failed[i].empty() ? "answered" : failed[i]), ",\"detail\":",
                      Q(backends[i].detail),
                      ",\"devices\":[", absl::StrJoin(backends[i].devices, ",",
                                                      [](std::string* o, const std::string& d) {
                                                        o->append(Q(d));
                                                      }),
                      "]}");
    }
    absl::StrAppend(&out, "],\"libraries\":[");
    for (size_t i = 0; i < libs.size(); ++i) {
      const std::string& f = failed[backends.size() + i];
      absl::StrAppend(&out, i ? "," : "", "{\"name\":", Q(libs[i].name), ",\"found\":",
                      libs[i].found ? "true" : "false", ",\"probe\":",
                      Q(f.empty() ? "answered" : f), ",\"version\":", Q(libs[i].version), "}");
    }
    absl::StrAppend(&out, "],\"interfaces\":[");
    for (size_t i = 0; i < ifaces.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", "{\"name\":", Q(ifaces[i].name), ",\"address\":",
                      Q(ifaces[i].address), ",\"loopback\":", ifaces[i].loopback ? "true" : "false",
                      "}");
    }
    absl::StrAppend(&out, "],\"environment\":{");
    for (size_t i = 0; i < env.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", Q(env[i].first), ":", Q(env[i].second));
    }
    absl::StrAppend(&out, "},\"master\":", Q(master), ",\"local_address\":", Q(route),
                    ",\"store\":", Q(store), ",\"plugin_path\":",
                    Q(absl::StrJoin(PluginSearchPaths(), ":")));
    if (ran) absl::StrAppend(&out, ",\"selftest\":", Q(selftest), ",\"busbw_gbps\":", busbw);
    absl::StrAppend(&out, "}\n");
    std::fputs(out.c_str(), stdout);
  } else {
    std::printf("Backends (search path %s):\n", absl::StrJoin(PluginSearchPaths(), ":").c_str());
    for (size_t i = 0; i < backends.size(); ++i) {
      const BackendProbe& b = backends[i];
      std::string first_line = b.detail.substr(0, b.detail.find('\n'));
      std::string state = !failed[i].empty() ? failed[i] : b.loaded ? "ok" : "unavailable";
      std::printf("  %-6s %-11s %s\n", b.name.c_str(), state.c_str(),
                  b.loaded ? absl::StrCat(first_line, " [", absl::StrJoin(b.devices, ","), "]").c_str()
                           : b.detail.c_str());
    }
    std::printf("Libraries:\n");
    for (size_t i = 0; i < libs.size(); ++i) {
      const std::string& f = failed[backends.size() + i];
      std::printf("  %-12s %s%s\n", libs[i].name.c_str(), f.empty() ? "" : (f + ": ").c_str(),
                  libs[i].version.c_str());
    }
    std::printf("Interfaces:\n");
    for (const auto& i : ifaces) {
      std::printf("  %-10s %s%s\n", i.name.c_str(), i.address.c_str(), i.loopback ? " (loopback)" : "");
    }
    std::printf("Master: %s, reached from local address %s\nStore: %s\n", master.c_str(),
                route.c_str(), store.c_str());
    std::printf("Environment:\n");
    for (const auto& [k, v] : env) std::printf("  %s=%s\n", k.c_str(), v.c_str());
    if (ran) std::printf("Self-test: %s, busbw %.2f GB/s\n", selftest.c_str(), busbw);
  }
  return selftest_ok && !problems ? 0 : 1;
}

}  // namespace
}  // namespace syncline::doctor

int main(int argc, char** argv) {
  syncline::cli::Usage usage;
  usage.program = "syncline-doctor";
  usage.description =
      "Reports what Syncline finds on this machine: the backends it can load (and why "
      "the others cannot), library versions, network interfaces, the route to "
      "MASTER_ADDR, the store, the plugin search path and the SYNCLINE_* environment. "
      "Under syncline-run it also runs an allreduce self-test across the ranks. Each "
      "backend and library is loaded in a child process: one that hangs or crashes while "
      "loading is reported as such. Exits with 1 when one did, or the self-test failed.";
  usage.epilog = "Example: syncline-run -n 2 syncline-doctor --selftest-mib 64";
  // Dashed (--batch-size) and underscored names both work.
  if (int exit = syncline::cli::ParseOrHelp(argc, argv, usage, "syncline_doctor/"); exit >= 0) return exit;
  return syncline::doctor::Main();
}
