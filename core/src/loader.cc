// loader.cc: dlopen-based plugin discovery with a reason for every failure.
#include "loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "syncline/env.h"
#include "syncline/log.h"
#include "syncline/status.h"

// The install folder of the plugins, relative to the folder that holds
// libsyncline (lib/syncline beside lib/libsyncline.so): found from where the
// library is at run time, never from a prefix fixed at configure time, so an
// installed tree still works after it is moved or unpacked elsewhere.
#ifndef SYNCLINE_PLUGIN_DIR_FROM_CORE
#define SYNCLINE_PLUGIN_DIR_FROM_CORE "syncline"
#endif

namespace syncline::internal {
namespace {

constexpr char kBackendPrefix[] = "libsyncline-backend-";
constexpr char kInterposerPrefix[] = "libsyncline-plugin-";

// Process-wide registry of opened libraries, keyed by file name.
struct Registry {
  std::mutex mu;
  std::map<std::string, const sl_backend_v1_t*> backends;
  std::map<std::string, const sl_interposer_v1_t*> interposers;
  // Zero-extended copies of tables built with a shorter sl_backend_v1_t,
  // keyed by the plugin's own table (which never moves or goes away).
  std::map<const sl_backend_v1_t*, std::unique_ptr<sl_backend_v1_t>> extended;
};
Registry& GetRegistry() {
  static Registry* registry = new Registry();  // intentionally leaked
  return *registry;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string CoreFolder() {
  Dl_info info;
  if (::dladdr(reinterpret_cast<void*>(&PluginSearchPath), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  // Canonical, so messages show /opt/x/lib rather than /opt/x/bin/../lib.
  char resolved[PATH_MAX];
  std::string path = ::realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Explains a dlopen failure: a missing dependency is named as such.
std::string DescribeDlError(const std::string& error) {
  if (absl::StrContains(error, "cannot open shared object file")) {
    std::string dep = error.substr(0, error.find(':'));
    return absl::StrCat("missing dependency ", dep, " (", error,
                        "); install it or add its folder to LD_LIBRARY_PATH");
  }
  if (absl::StrContains(error, "undefined symbol")) {
    return absl::StrCat("unresolved symbol (", error,
                        "); the plugin was built against another library version");
  }
  return absl::StrCat("not a loadable library (", error, ")");
}

// Tries each folder; returns the symbol's value or every failure reason.
absl::StatusOr<void*> OpenAndResolve(const std::string& file, const char* symbol,
                                     const std::string& what,
                                     std::vector<std::string>* tried) {
  for (const std::string& dir : PluginSearchPath()) {
    std::string path = absl::StrCat(dir, "/", file);
    if (!FileExists(path)) {
      tried->push_back(absl::StrCat(path, ": not found"));
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = ::dlerror();
      tried->push_back(absl::StrCat(path, ": ", DescribeDlError(err ? err : "?")));
      continue;
    }
    void* fn = ::dlsym(handle, symbol);
    if (fn == nullptr) {
      tried->push_back(absl::StrCat(path, ": not a Syncline ", what,
                                    " (it does not export ", symbol, ")"));
      ::dlclose(handle);
      continue;
    }
    SL_LOG(DEBUG, "loaded %s from %s", what, path);
    return fn;  // the handle stays open for the life of the process
  }
  return absl::NotFoundError("");
}

}  // namespace

std::vector<std::string> PluginSearchPath() {
  std::vector<std::string> dirs;
  std::set<std::string> seen;
  auto add = [&](const std::string& d) {
    if (!d.empty() && seen.insert(d).second) dirs.push_back(d);
  };
  for (absl::string_view d :
       absl::StrSplit(EnvString("SYNCLINE_PLUGIN_PATH"), ':', absl::SkipEmpty())) {
    add(std::string(d));
  }
  // The build tree keeps plugins beside libsyncline; an installed tree keeps
  // them in the plugin folder below it.
  std::string core = CoreFolder();
  add(core);
  if (!core.empty()) add(absl::StrCat(core, "/", SYNCLINE_PLUGIN_DIR_FROM_CORE));
  return dirs;
}

std::vector<std::string> AvailableBackends() {
  std::set<std::string> names;
  for (const std::string& dir : PluginSearchPath()) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      absl::string_view n = e->d_name;
      if (absl::ConsumePrefix(&n, kBackendPrefix) && absl::ConsumeSuffix(&n, ".so")) {
        names.insert(std::string(n));
      }
    }
    ::closedir(d);
  }
  return {names.begin(), names.end()};
}

absl::Status ValidateBackendTable(const sl_backend_v1_t* t, const std::string& path) {
  if (t == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": plugin returned no table"));
  }
  if (t->abi_version != SL_ABI_VERSION) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: built for Syncline plugin ABI version %u, but this libsyncline "
        "speaks version %u; rebuild the plugin against this Syncline",
        path, t->abi_version, SL_ABI_VERSION));
  }
  if (t->struct_size < SL_BACKEND_V1_MIN_SIZE) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: plugin table is %u bytes, expected at least %u; rebuild the plugin",
        path, t->struct_size, SL_BACKEND_V1_MIN_SIZE));
  }
  if (t->name == nullptr || t->comm_create == nullptr || t->comm_destroy == nullptr ||
      t->comm_abort == nullptr || t->post == nullptr || t->request_test == nullptr ||
      t->request_wait == nullptr || t->request_free == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": plugin table lacks a required entry point"));
  }
  return absl::OkStatus();
}

namespace {

// `t` itself, or (built against an older plugin_abi.h) a zero-extended copy
// in which the fields it lacks read as NULL. `t` must be valid.
const sl_backend_v1_t* ExtendLocked(Registry& reg, const sl_backend_v1_t* t,
                                    const std::string& path) {
  if (t->struct_size >= sizeof(sl_backend_v1_t)) return t;
  std::unique_ptr<sl_backend_v1_t>& copy = reg.extended[t];
  if (copy == nullptr) {
    copy = std::make_unique<sl_backend_v1_t>();  // zeroed
    std::memcpy(copy.get(), t, t->struct_size);
    copy->struct_size = sizeof(sl_backend_v1_t);
    SL_LOG(DEBUG, "%s: plugin table of %u bytes (this libsyncline's is %u); the "
           "entries it lacks are treated as absent", path, t->struct_size,
           sizeof(sl_backend_v1_t));
  }
  return copy.get();
}

}  // namespace

absl::StatusOr<const sl_backend_v1_t*> AdoptBackendTable(const sl_backend_v1_t* t,
                                                         const std::string& path) {
  SL_RETURN_IF_ERROR(ValidateBackendTable(t, path));
  Registry& reg = GetRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return ExtendLocked(reg, t, path);
}

namespace {

// Loads backend `name` (reg.mu held): its table, or nullptr with every
// reason it could not be loaded in `tried`.
const sl_backend_v1_t* LoadBackendLocked(Registry& reg, const std::string& name,
                                         std::vector<std::string>* tried) {
  auto it = reg.backends.find(name);
  if (it != reg.backends.end()) return it->second;
  if (name.empty() || name.find('/') != std::string::npos) return nullptr;
  const std::string file = absl::StrCat(kBackendPrefix, name, ".so");
  auto fn = OpenAndResolve(file, "syncline_backend_plugin_v1", "backend", tried);
  if (!fn.ok()) return nullptr;
  const sl_backend_v1_t* table = reinterpret_cast<sl_backend_entry_fn>(*fn)();
  absl::Status valid = ValidateBackendTable(table, file);
  if (!valid.ok()) {
    tried->push_back(std::string(valid.message()));
    return nullptr;
  }
  table = ExtendLocked(reg, table, file);
  reg.backends[name] = table;
  return table;
}

}  // namespace

absl::StatusOr<const sl_backend_v1_t*> LoadBackend(const std::string& name) {
  Registry& reg = GetRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  std::vector<std::string> tried;
  if (const sl_backend_v1_t* table = LoadBackendLocked(reg, name, &tried)) return table;
  // The other plugin files on the search path, told apart by whether they
  // load: a file that is there but cannot be loaded is no choice to offer.
  std::vector<std::string> loadable;
  std::vector<std::string> broken;
  for (const std::string& other : AvailableBackends()) {
    if (other == name) continue;
    std::vector<std::string> reasons;
    if (LoadBackendLocked(reg, other, &reasons) != nullptr) {
      loadable.push_back(other);
    } else {
      // The file is somewhere on the path: say why it failed there, not
      // that the folders before or after it lack it.
      std::vector<std::string> why;
      for (const std::string& r : reasons) {
        if (!absl::EndsWith(r, ": not found")) why.push_back(r);
      }
      broken.push_back(absl::StrCat(other, ": ", why.empty() ? "?" : absl::StrJoin(why, "; ")));
    }
  }
  return absl::NotFoundError(absl::StrFormat(
      "cannot load backend '%s'.\n  Tried:\n    %s\n  Available backends: %s\n%s"
      "  Search path: %s\n  Set SYNCLINE_BACKEND to an available backend, or add "
      "the plugin's folder to SYNCLINE_PLUGIN_PATH.",
      name, tried.empty() ? "(invalid name)" : absl::StrJoin(tried, "\n    "),
      loadable.empty() ? "(none that load)" : absl::StrJoin(loadable, ", "),
      broken.empty() ? ""
                     : absl::StrCat("  Found but cannot be loaded:\n    ",
                                    absl::StrJoin(broken, "\n    "), "\n"),
      absl::StrJoin(PluginSearchPath(), ":")));
}

absl::StatusOr<const sl_backend_v1_t*> ApplyInterposers(
    const sl_backend_v1_t* base, const std::vector<std::string>& names) {
  const sl_backend_v1_t* table = base;
  // Innermost first: "trace,check" means trace wraps check wraps the backend.
  for (auto name = names.rbegin(); name != names.rend(); ++name) {
    Registry& reg = GetRegistry();
    const sl_interposer_v1_t* ip = nullptr;
    {
      std::lock_guard<std::mutex> lock(reg.mu);
      auto it = reg.interposers.find(*name);
      if (it != reg.interposers.end()) {
        ip = it->second;
      } else {
        std::vector<std::string> tried;
        auto fn = OpenAndResolve(absl::StrCat(kInterposerPrefix, *name, ".so"),
                                 "syncline_interposer_plugin_v1", "interposer", &tried);
        if (!fn.ok()) {
          return absl::NotFoundError(absl::StrFormat(
              "cannot load interposer '%s' (from SYNCLINE_PLUGINS).\n  Tried:\n    %s",
              *name, absl::StrJoin(tried, "\n    ")));
        }
        ip = reinterpret_cast<sl_interposer_entry_fn>(*fn)();
        if (ip == nullptr || ip->abi_version != SL_ABI_VERSION ||
            ip->struct_size < sizeof(sl_interposer_v1_t) || ip->wrap == nullptr) {
          return absl::FailedPreconditionError(absl::StrFormat(
              "interposer '%s' was built for another plugin ABI (version %u, this "
              "libsyncline speaks %u); rebuild it",
              *name, ip ? ip->abi_version : 0, SL_ABI_VERSION));
        }
        reg.interposers[*name] = ip;
      }
    }
    sl_error_t err{};
    const sl_backend_v1_t* wrapped = nullptr;
    if (ip->wrap(table, &wrapped, &err) != SL_OK) {
      return absl::InternalError(absl::StrCat("interposer '", *name,
                                              "' failed to wrap: ", err.message));
    }
    SL_ASSIGN_OR_RETURN(table,
                        AdoptBackendTable(wrapped, absl::StrCat("interposer ", *name)));
  }
  return table;
}

}  // namespace syncline::internal
