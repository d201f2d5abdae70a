// plugin_table.h: the C function table of a backend, generated from its C++
// classes, so that every backend's ABI adapter is one piece of code.
//
// Each entry unwraps the opaque handle, runs the backend's C++ method under
// SlGuard (no exception crosses the ABI) and returns the result code. A
// backend provides, in its namespace:
//
//   class Communicator {
//     static sl_result_t Create(const sl_comm_config_t&,
//                               std::unique_ptr<Communicator>*, sl_error_t*);
//     void Abort();                       // any thread, idempotent
//     sl_result_t Post(const sl_op_t&, std::shared_ptr<Request>*, sl_error_t*);
//     // Only for a backend that offers comm_split (BackendInfo::comm_split):
//     sl_result_t Split(int32_t color, int32_t key, const sl_store_t*, uint64_t id,
//                       std::unique_ptr<Communicator>* child, sl_error_t*);
//   };
//   class Request {
//     sl_result_t Test(int* done, sl_error_t*) const;
//     sl_result_t Wait(int64_t timeout_ms, sl_error_t*) const;
//     // Only for a backend that offers request_stream_wait:
//     sl_result_t StreamWait(void* stream, sl_error_t*);
//   };
//
// and, in the global namespace, `struct sl_request { std::shared_ptr<Request>
// request; };`. Freeing a request drops only the caller's reference: the
// backend keeps its own while the op runs.
//
// plugin.cc then says only what is its own: its name, capabilities, version
// and optional entries. Example:
//   extern "C" SL_PLUGIN_EXPORT const sl_backend_t* SL_BACKEND_ENTRY(void) {
//     static constexpr char kName[] = "mybackend";
//     using Communicator = my_backend::Communicator;
//     return syncline::backend::PublishBackend<Communicator, kName>(
//         {syncline::backend::Capabilities::AllOps(SL_DEVICE_CPU),
//          "mybackend 0.1 (mytransport 2.3)",
//          // Only if it splits:
//          &syncline::backend::Adapter<Communicator, kName>::CommSplit});
//   }
#ifndef SYNCLINE_PLUGIN_SDK_PLUGIN_TABLE_H_
#define SYNCLINE_PLUGIN_SDK_PLUGIN_TABLE_H_

#include <memory>
#include <string>

#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/block_cache.h"
#include "syncline/plugin_sdk/error.h"

namespace syncline::backend {

template <typename Traits>
class PluginAdapter {
 public:
  using Comm = typename Traits::Communicator;
  // sl_request, complete only in the backend's TUs: named through Traits so
  // that the lookup waits for instantiation.
  using Handle = typename Traits::Handle;

  static sl_result_t CommCreate(void* /*ctx*/, const sl_comm_config_t* config,
                                sl_comm_t** comm, sl_error_t* err) {
    static const std::string what = Name("comm_create");
    return SlGuard(err, what.c_str(), [&] {
      if (config == nullptr || comm == nullptr) {
        return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                          "%s comm_create: null config or output pointer", Traits::kName);
      }
      if (config->struct_size < SL_COMM_CONFIG_MIN_SIZE) {
        return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                          "%s comm_create: config of %u bytes, expected at least %u "
                          "(its struct_size is unset or from another plugin_abi.h)",
                          Traits::kName, static_cast<unsigned>(config->struct_size),
                          static_cast<unsigned>(SL_COMM_CONFIG_MIN_SIZE));
      }
      std::unique_ptr<Comm> created;
      const sl_result_t rc = Comm::Create(*config, &created, err);
      if (rc == SL_OK) {
        *comm = reinterpret_cast<sl_comm_t*>(created.release());
        SlClearError(err);
      }
      return rc;
    });
  }

  static void CommDestroy(sl_comm_t* comm) {
    static const std::string what = Name("comm_destroy");
    SlGuardVoid(what.c_str(), [&] { delete Unwrap(comm); });
  }

  static sl_result_t CommAbort(sl_comm_t* comm, sl_error_t* err) {
    static const std::string what = Name("comm_abort");
    return SlGuard(err, what.c_str(), [&] {
      if (comm == nullptr) {
        return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "%s comm_abort: null communicator",
                          Traits::kName);
      }
      Unwrap(comm)->Abort();
      SlClearError(err);
      return SL_OK;
    });
  }

  // Instantiated only by a backend that opts in (Comm::Split must exist).
  static sl_result_t CommSplit(sl_comm_t* parent, int32_t color, int32_t key,
                               const sl_store_t* store, uint64_t new_comm_id,
                               sl_comm_t** child, sl_error_t* err) {
    static const std::string what = Name("comm_split");
    return SlGuard(err, what.c_str(), [&] {
      if (parent == nullptr || child == nullptr) {
        return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                          "%s comm_split: null communicator or output pointer", Traits::kName);
      }
      *child = nullptr;
      std::unique_ptr<Comm> made;
      const sl_result_t rc = Unwrap(parent)->Split(color, key, store, new_comm_id, &made, err);
      if (rc == SL_OK) {
        *child = reinterpret_cast<sl_comm_t*>(made.release());
        SlClearError(err);
      }
      return rc;
    });
  }

  static sl_result_t Post(sl_comm_t* comm, const sl_op_t* op, sl_request_t** request,
                          sl_error_t* err) {
    static const std::string what = Name("post");
    return SlGuard(err, what.c_str(), [&] {
      if (comm == nullptr || op == nullptr || request == nullptr) {
        return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                          "%s post: null communicator, op or output pointer", Traits::kName);
      }
      decltype(Handle::request) posted;
      const sl_result_t rc = Unwrap(comm)->Post(*op, &posted, err);
      // The handle's storage is recycled per thread (block_cache.h): one
      // malloc and free per op fewer on every backend.
      if (rc == SL_OK) *request = new (HandleBlocks::Allocate()) Handle{std::move(posted)};
      return rc;
    });
  }

  static sl_result_t RequestTest(sl_request_t* request, int* done, sl_error_t* err) {
    static const std::string what = Name("request_test");
    return SlGuard(err, what.c_str(), [&] {
      if (request == nullptr || done == nullptr) {
        return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                          "%s request_test: null request or output pointer", Traits::kName);
      }
      return static_cast<Handle*>(request)->request->Test(done, err);
    });
  }

  static sl_result_t RequestWait(sl_request_t* request, int64_t timeout_ms, sl_error_t* err) {
    static const std::string what = Name("request_wait");
    return OnRequest(request, what, err, [&](auto& r) { return r.Wait(timeout_ms, err); });
  }

  // Instantiated only by a backend that opts in (Request::StreamWait must exist).
  static sl_result_t RequestStreamWait(sl_request_t* request, void* stream, sl_error_t* err) {
    static const std::string what = Name("request_stream_wait");
    return OnRequest(request, what, err, [&](auto& r) { return r.StreamWait(stream, err); });
  }

  static void RequestFree(sl_request_t* request) {
    static const std::string what = Name("request_free");
    SlGuardVoid(what.c_str(), [&] {
      if (request == nullptr) return;
      Handle* handle = static_cast<Handle*>(request);
      handle->~Handle();
      HandleBlocks::Free(handle);
    });
  }

 private:
  using HandleBlocks = BlockCache<sizeof(Handle)>;
  static Comm* Unwrap(sl_comm_t* comm) { return reinterpret_cast<Comm*>(comm); }
  // `call(request)` on the backend's request under SlGuard, a null handle
  // refused as "<what>: null request".
  template <typename Call>
  static sl_result_t OnRequest(sl_request_t* request, const std::string& what, sl_error_t* err,
                               Call call) {
    return SlGuard(err, what.c_str(), [&] {
      if (request == nullptr) {
        return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "%s: null request", what.c_str());
      }
      return call(*static_cast<Handle*>(request)->request);
    });
  }
  // "gloo post": the context SlGuard puts in front of an escaped exception.
  static std::string Name(const char* entry) {
    return std::string(Traits::kName) + " " + entry;
  }
};

// What a backend can do, as sl_capabilities_t says it, with the storage of
// its reduce masks (bit i of a mask is enum value i).
struct Capabilities {
  uint32_t device_mask = 0;  // 1u << sl_device_type_t
  uint32_t op_mask = 0;      // 1u << sl_op_kind_t
  uint32_t dtype_mask = 0;   // dtypes for data movement
  uint32_t reduce_dtype_mask[SL_REDOP_COUNT] = {};  // dtypes per reduce op

  // Every op on buffers of `device`, moving and reducing `dtypes` (all of
  // them by default) with every reduce op.
  static Capabilities AllOps(sl_device_type_t device,
                             uint32_t dtypes = (1u << SL_DTYPE_COUNT) - 1) {
    Capabilities caps;
    caps.device_mask = 1u << device;
    caps.op_mask = (1u << SL_OP_KIND_COUNT) - 1;
    caps.dtype_mask = dtypes;
    for (uint32_t& mask : caps.reduce_dtype_mask) mask = dtypes;
    return caps;
  }
};

// The ABI's view of `caps` for the table of `Traits`: a copy that lives as
// long as the process (one per backend; the last one made wins).
template <typename Traits>
const sl_capabilities_t* PublishCapabilities(const Capabilities& caps) {
  static Capabilities stored;
  static sl_capabilities_t abi{};
  stored = caps;
  abi = sl_capabilities_t{sizeof(sl_capabilities_t), stored.device_mask, stored.op_mask,
                          stored.dtype_mask, SL_REDOP_COUNT, stored.reduce_dtype_mask};
  return &abi;
}

// BackendTraits<Communicator, kName>
//
// The Traits of PluginAdapter and MakeBackendTable for a backend whose
// request handle is the usual `struct sl_request` (complete in the
// backend's work.h, before the table is made). `kName` is a constant with
// static storage: `constexpr char kName[] = "gloo";`.
template <typename CommunicatorT, const char* kNameV>
struct BackendTraits {
  using Communicator = CommunicatorT;
  using Handle = ::sl_request;
  static constexpr const char* kName = kNameV;
};

// What a backend says about itself that its classes do not.
struct BackendInfo {
  Capabilities caps;
  // "mybackend 0.1 (mytransport 2.3)": names the transport's version (the
  // core compares it across ranks). Must live until the process exits (a
  // literal, or a static string's c_str()).
  const char* version = "";
  // The optional entries, NULL when not offered: comm_split (usually
  // &Adapter<Communicator, kName>::CommSplit; NULL makes the core build
  // sub-groups with comm_create) and request_stream_wait (a device backend's
  // &Adapter<Communicator, kName>::RequestStreamWait; NULL makes the core
  // wait on the host).
  decltype(sl_backend_t::comm_split) comm_split = nullptr;
  decltype(sl_backend_t::request_stream_wait) request_stream_wait = nullptr;
};

// A table with the ABI version, size, name, capabilities, version and
// every entry point filled from `info` and the adapter of `Traits`.
template <typename Traits>
sl_backend_t MakeBackendTable(const BackendInfo& info) {
  using Adapter = PluginAdapter<Traits>;
  sl_backend_t table{};
  table.abi_version = SL_ABI_VERSION;
  table.struct_size = sizeof(sl_backend_t);
  table.name = Traits::kName;
  table.version = info.version;
  table.caps = PublishCapabilities<Traits>(info.caps);
  table.ctx = nullptr;
  table.comm_create = &Adapter::CommCreate;
  table.comm_destroy = &Adapter::CommDestroy;
  table.comm_abort = &Adapter::CommAbort;
  table.comm_split = info.comm_split;
  table.post = &Adapter::Post;
  table.request_test = &Adapter::RequestTest;
  table.request_wait = &Adapter::RequestWait;
  table.request_free = &Adapter::RequestFree;
  table.request_stream_wait = info.request_stream_wait;
  return table;
}

// Adapter<Communicator, kName>: the entries of the backend `kName` (for
// BackendInfo's optional ones: &Adapter<Communicator, kName>::CommSplit).
template <typename Communicator, const char* kName>
using Adapter = PluginAdapter<BackendTraits<Communicator, kName>>;

// PublishBackend()
//
// The table SL_BACKEND_ENTRY returns, for the backend `kName` (a constant
// with static storage) over `Communicator`: made from `info` on the first
// call (thread-safe), the same table on every later one.
template <typename Communicator, const char* kName>
const sl_backend_t* PublishBackend(const BackendInfo& info) {
  static const sl_backend_t table =
      MakeBackendTable<BackendTraits<Communicator, kName>>(info);
  return &table;
}

// SL_PLUGIN_STR(GLOO_VERSION_MAJOR): a macro's value as a string literal,
// for version strings.
#define SL_PLUGIN_STR(x) SL_PLUGIN_STR_INNER(x)
#define SL_PLUGIN_STR_INNER(x) #x

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_PLUGIN_TABLE_H_
