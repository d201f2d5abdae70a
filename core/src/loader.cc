// loader.cc: dlopen-based plugin discovery with a reason for every failure.
#include "loader.h"

#include "abi_v1_shim.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
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
// A struct_size above this is no table of any version: garbage, refused.
constexpr uint32_t kMaxStructSize = 4096;

// A plugin's table as this libsyncline's header lays it out.
struct ExtendedTable {
  sl_backend_t table{};
  sl_capabilities_t caps{};
  uint32_t reduce_masks[SL_REDOP_COUNT] = {};
};

// Process-wide registry of opened libraries, keyed by file name.
struct Registry {
  std::mutex mu;
  std::map<std::string, const sl_backend_t*> backends;
  std::map<std::string, const sl_interposer_t*> interposers;
  // Zero-extended copies of tables (and their capabilities) built with a
  // shorter header, keyed by the plugin's own table (which never moves or
  // goes away).
  std::map<const sl_backend_t*, std::unique_ptr<ExtendedTable>> extended;
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

// An entry point found: its value and the ABI version its name carries.
struct Entry {
  void* fn;
  uint32_t abi_version;
};

// Tries each folder, and in each library the entry points of `symbols`
// (newest ABI version first, {name, version}); returns the first found or
// every failure reason.
absl::StatusOr<Entry> OpenAndResolve(
    const std::string& file,
    std::initializer_list<std::pair<const char*, uint32_t>> symbols,
    const std::string& what, std::vector<std::string>* tried) {
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
    Entry entry{nullptr, 0};
    for (const auto& [symbol, version] : symbols) {
      entry = Entry{::dlsym(handle, symbol), version};
      if (entry.fn != nullptr) break;
    }
    if (entry.fn == nullptr) {
      tried->push_back(absl::StrCat(path, ": not a Syncline ", what,
                                    " (it does not export ",
                                    absl::StrJoin(symbols, " or ", [](std::string* out,
                                                                    const auto& s) {
                                      absl::StrAppend(out, s.first);
                                    }),
                                    ")"));
      ::dlclose(handle);
      continue;
    }
    SL_LOG(DEBUG, "loaded %s from %s (plugin ABI v%u)", what, path, entry.abi_version);
    return entry;  // the handle stays open for the life of the process
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

absl::Status ValidateBackendTable(const sl_backend_t* t, const std::string& path) {
  if (t == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": plugin returned no table"));
  }
  if (t->abi_version != SL_ABI_VERSION) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: built for Syncline plugin ABI version %u, but its table came "
        "from the entry point of version %u (%s), which this libsyncline "
        "speaks; rebuild the plugin against this Syncline",
        path, t->abi_version, SL_ABI_VERSION, SL_BACKEND_ENTRY_NAME));
  }
  if (t->struct_size < SL_BACKEND_V2_MIN_SIZE || t->struct_size > kMaxStructSize) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: plugin table is %u bytes, expected at least %u (and at most %u); the "
        "plugin's struct_size is wrong or it was built against another "
        "plugin_abi.h: rebuild the plugin",
        path, t->struct_size, SL_BACKEND_V2_MIN_SIZE, kMaxStructSize));
  }
  if (t->name == nullptr || t->comm_create == nullptr || t->comm_destroy == nullptr ||
      t->comm_abort == nullptr || t->post == nullptr || t->request_test == nullptr ||
      t->request_wait == nullptr || t->request_free == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": plugin table lacks a required entry point"));
  }
  const sl_capabilities_t* caps = t->caps;
  if (caps == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": plugin table has no capabilities (caps is NULL)"));
  }
  if (caps->struct_size < SL_CAPABILITIES_MIN_SIZE || caps->struct_size > kMaxStructSize) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: plugin capabilities are %u bytes, expected at least %u (and at most %u); "
        "rebuild the plugin",
        path, caps->struct_size, SL_CAPABILITIES_MIN_SIZE, kMaxStructSize));
  }
  if (caps->reduce_op_count > 0 && caps->reduce_dtype_mask == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: plugin capabilities list %u reduce ops but reduce_dtype_mask is NULL",
        path, caps->reduce_op_count));
  }
  return absl::OkStatus();
}

namespace {

// `t` itself, or (built against a header with a shorter table or shorter
// capabilities, or fewer reduce ops) a zero-extended copy in which what it
// lacks reads as NULL / unsupported. `t` must be valid. A longer table
// (a newer header) is `t` itself: the core reads only the fields it knows.
const sl_backend_t* ExtendLocked(Registry& reg, const sl_backend_t* t,
                                 const std::string& path) {
  const sl_capabilities_t* caps = t->caps;
  if (t->struct_size >= sizeof(sl_backend_t) && caps->struct_size >= sizeof(sl_capabilities_t) &&
      caps->reduce_op_count >= SL_REDOP_COUNT) {
    return t;
  }
  std::unique_ptr<ExtendedTable>& copy = reg.extended[t];
  if (copy == nullptr) {
    copy = std::make_unique<ExtendedTable>();  // zeroed
    std::memcpy(&copy->table, t, std::min<size_t>(t->struct_size, sizeof(sl_backend_t)));
    copy->table.struct_size = sizeof(sl_backend_t);
    std::memcpy(&copy->caps, caps, std::min<size_t>(caps->struct_size, sizeof(sl_capabilities_t)));
    copy->caps.struct_size = sizeof(sl_capabilities_t);
    for (uint32_t op = 0; op < caps->reduce_op_count && op < SL_REDOP_COUNT; ++op) {
      copy->reduce_masks[op] = caps->reduce_dtype_mask[op];
    }
    copy->caps.reduce_op_count = SL_REDOP_COUNT;
    copy->caps.reduce_dtype_mask = copy->reduce_masks;
    copy->table.caps = &copy->caps;
    SL_LOG(DEBUG, "%s: plugin table of %u bytes, capabilities of %u bytes with %u "
           "reduce ops (this libsyncline's are %u, %u and %u); what it lacks is "
           "treated as absent", path, t->struct_size, caps->struct_size,
           caps->reduce_op_count, sizeof(sl_backend_t), sizeof(sl_capabilities_t),
           SL_REDOP_COUNT);
  }
  return &copy->table;
}

}  // namespace

absl::StatusOr<const sl_backend_t*> AdoptBackendTable(const sl_backend_t* t,
                                                      const std::string& path) {
  SL_RETURN_IF_ERROR(ValidateBackendTable(t, path));
  Registry& reg = GetRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return ExtendLocked(reg, t, path);
}

namespace {

// Loads backend `name` (reg.mu held): its table, or nullptr with every
// reason it could not be loaded in `tried`. The newest entry point first;
// a plugin built for ABI v1 gets the v1 shim.
const sl_backend_t* LoadBackendLocked(Registry& reg, const std::string& name,
                                      std::vector<std::string>* tried) {
  auto it = reg.backends.find(name);
  if (it != reg.backends.end()) return it->second;
  if (name.empty() || name.find('/') != std::string::npos) return nullptr;
  const std::string file = absl::StrCat(kBackendPrefix, name, ".so");
  auto entry = OpenAndResolve(
      file, {{SL_BACKEND_ENTRY_NAME, SL_ABI_VERSION}, {"syncline_backend_plugin_v1", 1}},
      "backend", tried);
  if (!entry.ok()) return nullptr;
  const sl_backend_t* table = nullptr;
  if (entry->abi_version == 1) {
    using V1Entry = const sl_backend_v1_t* (*)();
    absl::StatusOr<const sl_backend_t*> shim =
        AdaptV1Backend(reinterpret_cast<V1Entry>(entry->fn)(), file);
    if (!shim.ok()) {
      tried->push_back(std::string(shim.status().message()));
      return nullptr;
    }
    table = *shim;
  } else {
    table = reinterpret_cast<sl_backend_entry_fn>(entry->fn)();
    absl::Status valid = ValidateBackendTable(table, file);
    if (!valid.ok()) {
      tried->push_back(std::string(valid.message()));
      return nullptr;
    }
    table = ExtendLocked(reg, table, file);
  }
  reg.backends[name] = table;
  return table;
}

}  // namespace

absl::StatusOr<const sl_backend_t*> LoadBackend(const std::string& name) {
  Registry& reg = GetRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  std::vector<std::string> tried;
  if (const sl_backend_t* table = LoadBackendLocked(reg, name, &tried)) return table;
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

absl::StatusOr<const sl_backend_t*> ApplyInterposers(
    const sl_backend_t* base, const std::vector<std::string>& names) {
  const sl_backend_t* table = base;
  // Innermost first: "trace,check" means trace wraps check wraps the backend.
  for (auto name = names.rbegin(); name != names.rend(); ++name) {
    Registry& reg = GetRegistry();
    const sl_interposer_t* ip = nullptr;
    {
      std::lock_guard<std::mutex> lock(reg.mu);
      auto it = reg.interposers.find(*name);
      if (it != reg.interposers.end()) {
        ip = it->second;
      } else {
        std::vector<std::string> tried;
        auto entry = OpenAndResolve(
            absl::StrCat(kInterposerPrefix, *name, ".so"),
            {{SL_INTERPOSER_ENTRY_NAME, SL_ABI_VERSION}, {"syncline_interposer_plugin_v1", 1}},
            "interposer", &tried);
        if (!entry.ok()) {
          return absl::NotFoundError(absl::StrFormat(
              "cannot load interposer '%s' (from SYNCLINE_PLUGINS).\n  Tried:\n    %s",
              *name, absl::StrJoin(tried, "\n    ")));
        }
        // An interposer sees and returns the current table: one built for
        // an older ABI cannot be shimmed (plugin_abi.h, version policy).
        ip = entry->abi_version == SL_ABI_VERSION
                 ? reinterpret_cast<sl_interposer_entry_fn>(entry->fn)()
                 : nullptr;
        if (ip == nullptr || ip->abi_version != SL_ABI_VERSION ||
            ip->struct_size < sizeof(sl_interposer_t) || ip->wrap == nullptr) {
          return absl::FailedPreconditionError(absl::StrFormat(
              "interposer '%s' was built for another plugin ABI (version %u, this "
              "libsyncline speaks %u, and interposers must match it); rebuild it "
              "against this Syncline",
              *name, ip ? ip->abi_version : entry->abi_version, SL_ABI_VERSION));
        }
        reg.interposers[*name] = ip;
      }
    }
    sl_error_t err{};
    const sl_backend_t* wrapped = nullptr;
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
