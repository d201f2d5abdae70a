// communicator.cc: Communicator over a loaded plugin table.
#include "syncline/communicator.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend.h"
#include "backend_agreement.h"
#include "communicator_impl.h"
#include "loader.h"
#include "store_adapter.h"
#include "syncline/env.h"
#include "syncline/log.h"
#include "syncline/pitfalls.h"
#include "syncline/rendezvous.h"
#include "syncline/status.h"
#include "work_impl.h"

namespace syncline {


namespace {


// Communicators created by this process, in order; the same order on every
// rank gives every rank the same ids.
std::atomic<uint64_t> g_next_comm_id{1};

// One rendezvous store per process and address, shared by communicators.
std::mutex g_store_mu;
std::map<std::string, std::weak_ptr<Store>> g_stores;
std::atomic<int> g_rendezvous_count{0};


absl::StatusOr<std::shared_ptr<Store>> RendezvousStore(const RendezvousInfo& info,
                                                       absl::Duration timeout) {
  std::string key = absl::StrCat(info.master_addr, ":", info.master_port, "/",
                                 info.store_prefix, "/", info.world_size);
  std::lock_guard<std::mutex> lock(g_store_mu);
  if (info.world_size > 1) {
    if (auto cached = g_stores[key].lock()) return cached;
  }
  RendezvousInfo scoped = info;
  // Later rendezvous in the same job (after every communicator was freed)
  // use fresh keys, so old check-ins do not count as duplicates.
  int generation = g_rendezvous_count++;
  if (generation > 0) scoped.store_prefix = absl::StrCat(info.store_prefix, "r", generation);
  SL_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, ConnectRendezvousStore(scoped, timeout));
  g_stores[key] = store;
  return store;
}

}  // namespace

namespace internal {
absl::Status CreateBackendComm(Communicator::Impl& impl, int rank, int size,
                               std::shared_ptr<Store> plugin_store, Device device,
                               absl::Duration timeout) {
  auto backend = std::make_shared<BackendComm>(impl.table, std::move(plugin_store));
  sl_comm_config_t config{sizeof(sl_comm_config_t),
                          rank,
                          size,
                          backend->store(),
                          static_cast<sl_device_type_t>(device.type),
                          device.index,
                          absl::ToInt64Milliseconds(timeout),
                          impl.comm_id,
                          impl.backend_options.empty() ? nullptr : impl.backend_options.c_str()};
  sl_error_t err{};
  sl_result_t r = impl.table->comm_create(impl.table->ctx, &config, backend->comm_slot(), &err);
  if (r != SL_OK) {
    *backend->comm_slot() = nullptr;
    // A bad option names where the options came from.
    const std::string where =
        r == SL_ERR_INVALID_ARGUMENT && !impl.backend_options.empty()
            ? absl::StrCat(" (backend options '", impl.backend_options,
                           "', from CommunicatorOptions::backend_options and ",
                           impl.backend_options_variable, ")")
            : "";
    return absl::Status(internal::ToStatusCode(r),
                        absl::StrFormat("%s: creating the communicator on rank %d/%d "
                                        "failed: %s%s",
                                        impl.table->name, rank, size, err.message, where));
  }
  impl.backend = std::move(backend);
  return absl::OkStatus();
}

absl::Status SplitBackendComm(Communicator::Impl& parent, Communicator::Impl& child,
                              int color, int key, std::shared_ptr<Store> plugin_store) {
  auto backend = std::make_shared<BackendComm>(parent.table, std::move(plugin_store));
  sl_error_t err{};
  sl_result_t r;
  {
    std::lock_guard<std::mutex> lock(parent.post_mu);
    r = parent.table->comm_split(parent.backend->comm(), color, key, backend->store(),
                                 child.comm_id, backend->comm_slot(), &err);
  }
  if (r != SL_OK) {
    *backend->comm_slot() = nullptr;
    return absl::Status(internal::ToStatusCode(r), err.message);
  }
  // color < 0 and a communicator anyway is a backend bug: `backend` destroys
  // it rather than leak it.
  if (color < 0) return absl::OkStatus();
  if (backend->comm() == nullptr) {
    return absl::InternalError(absl::StrCat(parent.table->name,
                                            " comm_split returned no communicator"));
  }
  child.backend = std::move(backend);
  return absl::OkStatus();
}
}  // namespace internal

namespace {

// SYNCLINE_<NAME>_OPTIONS for backend `name` ("ucx": SYNCLINE_UCX_OPTIONS).
std::string BackendOptionsVariable(const std::string& name) {
  std::string upper = absl::AsciiStrToUpper(name);
  for (char& c : upper) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return absl::StrCat("SYNCLINE_", upper, "_OPTIONS");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    const CommunicatorOptions& options) {
  absl::Duration timeout = options.timeout;
  if (timeout <= absl::ZeroDuration()) {
    SL_ASSIGN_OR_RETURN(timeout, EnvSeconds("SYNCLINE_TIMEOUT"));
  }
  int rank = options.rank, size = options.world_size;
  std::shared_ptr<Store> root = options.store;
  bool hosts_store = false;  // this process serves the rendezvous store
  if (root == nullptr) {
    SL_ASSIGN_OR_RETURN(RendezvousInfo info,
                        ResolveRendezvous(options.rank, options.world_size));
    rank = info.rank;
    size = info.world_size;
    SetLogRank(rank, size);
    CheckStartupPitfalls(rank, size, info.local_world_size);
    SL_ASSIGN_OR_RETURN(root, RendezvousStore(info, timeout));
    hosts_store = info.rank == 0 && info.world_size > 1 && !info.store_hosted;
  } else if (rank < 0 || size < 1 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CommunicatorOptions with a store need rank and world_size (got rank %d "
        "of %d)", rank, size));
  }
  SetLogRank(rank, size);
  const uint64_t comm_id = g_next_comm_id++;
  auto scoped = MakePrefixStore(absl::StrCat("comm", comm_id), root);

  auto impl = std::make_unique<Impl>();
  impl->comm_id = comm_id;
  impl->root_store = root;
  impl->backend_options = options.backend_options;
  absl::StatusOr<std::string> name = internal::ChooseBackend(options.backend, options.device);
  if (name.ok()) {
    impl->backend_options_variable = BackendOptionsVariable(*name);
    const char* from_env = std::getenv(impl->backend_options_variable.c_str());
    if (from_env != nullptr && *from_env != '\0') {
      impl->backend_options = impl->backend_options.empty()
                                  ? std::string(from_env)
                                  : absl::StrCat(impl->backend_options, ";", from_env);
    }
  }
  absl::StatusOr<const sl_backend_t*> table =
      name.ok() ? internal::LoadBackend(*name) : absl::StatusOr<const sl_backend_t*>(name.status());
  const std::vector<std::string> plugins = internal::ChoosePlugins(options.plugins);
  CheckOptionPitfalls(rank, plugins);
  if (table.ok()) table = internal::ApplyInterposers(*table, plugins);
  // Every rank, including one that failed to load, hears the same verdict.
  absl::StatusOr<std::string> choice =
      table.ok() ? absl::StatusOr<std::string>(absl::StrFormat(
                       "%s (plugin ABI %u, %s)", (*table)->name, (*table)->abi_version,
                       (*table)->version ? (*table)->version : "?"))
                 : absl::StatusOr<std::string>(table.status());
  if (size > 1) {
    SL_RETURN_IF_ERROR(
        internal::AgreeOnBackend(*scoped, rank, size, choice, timeout, hosts_store));
  }
  if (!table.ok()) return table.status();
  impl->table = *table;
  impl->name = (*table)->name;
  // The plugin gets its own scope: the agreement keys above are "backend/...".
  SL_RETURN_IF_ERROR(internal::CreateBackendComm(*impl, rank, size,
                                                 MakePrefixStore("plugin", scoped),
                                                 options.device, timeout));
  impl->recorder =
      std::make_shared<internal::FlightRecorder>(rank, size, comm_id, scoped, impl->name);
  impl->backend->set_recorder(impl->recorder);
  SL_LOG(DEBUG, "communicator %d ready: %d ranks over %s", comm_id, size, impl->name);
  return std::unique_ptr<Communicator>(
      new Communicator(std::move(impl), rank, size, options.device, timeout, scoped));
}

Communicator::Communicator(std::unique_ptr<Impl> impl, int rank, int size, Device device,
                           absl::Duration timeout, std::shared_ptr<Store> store)
    : impl_(std::move(impl)), rank_(rank), size_(size), device_(device),
      timeout_(timeout), store_(std::move(store)) {}

Communicator::~Communicator() {
  // Ops still running are aborted; the plugin communicator itself goes with
  // the last Work that holds it (backend_comm.h).
  if (impl_ && impl_->backend) impl_->backend->Close();
}

const std::string& Communicator::backend_name() const { return impl_->name; }

std::string Communicator::DumpFlightRecorder() const { return impl_->recorder->ToJson(); }

bool Communicator::SupportsReduce(DataType dtype, ReduceOp op, Device device) const {
  const sl_capabilities_t* caps = impl_->table->caps;
  return (caps->device_mask & (1u << static_cast<int>(device.type))) &&
         (sl_caps_reduce_dtypes(caps, static_cast<sl_redop_t>(op)) &
          (1u << static_cast<int>(dtype)));
}

absl::Status Communicator::Abort() {
  sl_error_t err{};
  sl_result_t r = impl_->table->comm_abort(impl_->backend->comm(), &err);
  if (r != SL_OK) return absl::Status(internal::ToStatusCode(r), err.message);
  return absl::OkStatus();
}

}  // namespace syncline
