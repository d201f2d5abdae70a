/*
 * plugin_abi.h: the versioned C ABI between libsyncline and its plugins.
 *
 * A backend is a shared library `libsyncline-backend-<name>.so` that exports
 *
 *     const sl_backend_v2_t* syncline_backend_plugin_v2(void);
 *
 * (write it as `const sl_backend_t* SL_BACKEND_ENTRY(void)`), and an
 * interposer (trace, check, faults) is `libsyncline-plugin-<name>.so` and
 * exports `const sl_interposer_v2_t* syncline_interposer_plugin_v2(void)`
 * (`SL_INTERPOSER_ENTRY`). `sl_backend_t` and `sl_interposer_t` name the
 * current version's types.
 *
 * Only C types cross this boundary. Every fallible call returns an
 * `sl_result_t` and fills an `sl_error_t` with a human-readable message. A C++
 * exception must never propagate out of a plugin: catch it and translate it.
 *
 * Version policy (as NCCL's net and tuner plugins):
 *   - SL_ABI_VERSION is the ABI's major version. It changes only when a
 *     released layout cannot be kept (a field moves, a signature changes);
 *     the entry point's name carries it (`..._plugin_v2`), and so does the
 *     table's type. Each released major version is kept verbatim under
 *     tests/core/frozen_abi/v<N>/.
 *   - The loader looks for the newest entry point first, then for older
 *     ones. A backend built for an older major version (today: v1) is
 *     loaded through a shim in the core that translates each call, so it
 *     keeps working unchanged (split_test's FrozenAbi). An interposer sees
 *     and returns the current table, so it must be rebuilt for a new major
 *     version; the loader says so when it finds an old one.
 *   - Within a major version, every struct that crosses the ABI starts with
 *     `struct_size`, the size of the struct as its producer was built:
 *     sl_backend_v2_t, sl_capabilities_t, sl_op_t, sl_comm_config_t,
 *     sl_store_t, sl_interposer_v2_t. Fields are only ever appended at the
 *     end, each appended field is optional (zero / NULL means "not
 *     provided"), and a reader treats whatever lies beyond `struct_size`
 *     as zero (SL_HAS_FIELD). Arrays whose length may grow live behind a
 *     pointer with a count (sl_capabilities_t::reduce_dtype_mask), never
 *     inside a struct. sl_buffer_t and sl_error_t are fixed forever: a new
 *     property of a buffer is a new sl_op_t field.
 *   - The loader refuses a table smaller than its version's first release
 *     (SL_BACKEND_V2_MIN_SIZE, SL_CAPABILITIES_MIN_SIZE) or of an unknown
 *     `abi_version`, with the reason, and hands the core a copy of a short
 *     table (or short capabilities) zero-extended to this header's size; a
 *     longer table (from a newer header) is read up to what it knows.
 *   - New enum values (an op kind, a dtype, a reduce op) are appended; a
 *     plugin that does not know one simply does not list it in its caps.
 *
 * Threading: plugins must allow `post`, `request_*` and `comm_abort` to be called
 * from any thread. Calls on one communicator that post ops are serialized by the
 * core (one poster at a time, in sequence-number order).
 */
#ifndef SYNCLINE_PLUGIN_ABI_H_
#define SYNCLINE_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SL_ABI_VERSION 2u

/* True when a struct of `struct_size` bytes, as its producer built it,
 * holds `field` of `type` wholly; a field beyond it reads as zero / NULL. */
#define SL_HAS_FIELD(ptr, type, field)                                   \
  ((size_t)(ptr)->struct_size >=                                         \
   offsetof(type, field) + sizeof(((const type*)0)->field))

#if defined(__GNUC__)
#define SL_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define SL_PLUGIN_EXPORT
#endif

/* Result codes. The core maps them one to one onto absl::StatusCode, as
 * each comment ends ("-> absl kX"), and back; a value outside this enum
 * (from a newer plugin) reads as kInternal, and a status code not listed
 * here becomes SL_ERR_INTERNAL. No code maps to kUnknown: that is what
 * Work::status() returns while an op is still running (work.h). */
typedef enum sl_result {
  SL_OK = 0,                   /* -> absl kOk */
  SL_ERR_INVALID_ARGUMENT = 1, /* bad input from the caller -> absl kInvalidArgument */
  SL_ERR_UNSUPPORTED = 2,      /* a dtype/op/device pairing the plugin lacks
                                  -> absl kUnimplemented */
  SL_ERR_TIMEOUT = 3,          /* deadline passed (op or wait) -> absl kDeadlineExceeded */
  SL_ERR_PEER = 4,             /* a peer died, closed its connection or erred
                                  -> absl kUnavailable */
  SL_ERR_INTERNAL = 5,         /* a bug or transport failure -> absl kInternal */
  SL_ERR_ABORTED = 6,          /* the communicator was aborted -> absl kAborted */
  SL_ERR_UNAVAILABLE = 7,      /* a resource is missing or exhausted (no GPU, no
                                  device, out of memory) -> absl kResourceExhausted */
  SL_ERR_MISMATCH = 8          /* ranks disagree about an op (desync)
                                  -> absl kFailedPrecondition */
} sl_result_t;

/* Error detail filled by a failing call. Always NUL-terminated. */
typedef struct sl_error {
  char message[1024];
} sl_error_t;

typedef enum sl_dtype {
  SL_F32 = 0,
  SL_F64 = 1,
  SL_F16 = 2,
  SL_BF16 = 3,
  SL_I8 = 4,
  SL_U8 = 5,
  SL_I32 = 6,
  SL_I64 = 7,
  SL_DTYPE_COUNT = 8
} sl_dtype_t;

typedef enum sl_redop {
  SL_SUM = 0,
  SL_PROD = 1,
  SL_MIN = 2,
  SL_MAX = 3,
  SL_AVG = 4,
  SL_REDOP_COUNT = 5
} sl_redop_t;

typedef enum sl_device_type {
  SL_DEVICE_CPU = 0,
  SL_DEVICE_CUDA = 1
} sl_device_type_t;

typedef enum sl_op_kind {
  SL_OP_ALLREDUCE = 0,
  SL_OP_BROADCAST = 1,
  SL_OP_REDUCE = 2,
  SL_OP_ALLGATHER = 3,
  SL_OP_REDUCE_SCATTER = 4,
  SL_OP_ALLTOALL = 5,
  SL_OP_BARRIER = 6,
  SL_OP_SEND = 7,
  SL_OP_RECV = 8,
  SL_OP_KIND_COUNT = 9
} sl_op_kind_t;

/* A non-owning view of memory. `count` is in elements of `dtype`. */
typedef struct sl_buffer {
  void* data;
  size_t count;
  sl_dtype_t dtype;
  sl_device_type_t device;
  int32_t device_index;
  void* stream; /* cudaStream_t for CUDA buffers, NULL otherwise */
} sl_buffer_t;

/*
 * One operation. Buffer conventions (n = elements per rank, P = world size):
 *   ALLREDUCE       send: n, recv: n (may alias send)
 *   BROADCAST       recv: n on every rank, in place; send unused
 *   REDUCE          send: n; recv: n on root only (may alias send)
 *   ALLGATHER       send: n, recv: n*P, rank i's block at offset i*n
 *   REDUCE_SCATTER  send: n*P, recv: n (this rank's reduced block)
 *   ALLTOALL        send: n*P (block j goes to rank j), recv: n*P
 *   BARRIER         no buffers
 *   SEND            send: n, to `peer`;  RECV  recv: n, from `peer`
 */
/* Reserved bits of sl_op_t::seq. A user's collectives count from 1 in the
 * low bits, the same on every rank. The high bits mark other numberings, so
 * that a backend that tags messages with seq never matches one with another:
 *   SL_SEQ_P2P_BIT        send/recv, which the core numbers on their own
 *                         (they need not be issued alike on every rank);
 *   SL_SEQ_INTERPOSER_BIT an op an interposer posts for itself, with
 *     | SL_SEQ_SPLIT_BIT | n    a wrapper's (color, key) exchange before its
 *                               n-th comm_split (the plugin SDK's interposer);
 *     | SL_SEQ_CHECK_BIT | seq  check's fingerprint exchange before op seq.
 * Gloo folds only the low 12 bits of seq into its tags, with a hash of the
 * op's shape; it can, because it runs collectives one at a time. */
#define SL_SEQ_P2P_BIT (UINT64_C(1) << 62)
#define SL_SEQ_INTERPOSER_BIT (UINT64_C(1) << 63)
#define SL_SEQ_SPLIT_BIT (UINT64_C(1) << 30)
#define SL_SEQ_CHECK_BIT (UINT64_C(1) << 31)

typedef struct sl_op {
  uint32_t struct_size; /* sizeof(sl_op_t) as its producer was built
                           (sl_op_init sets it) */
  sl_op_kind_t kind;
  uint64_t seq;         /* per-communicator sequence number, from 1; high
                           bits reserved (SL_SEQ_P2P_BIT and above) */
  sl_buffer_t send;
  sl_buffer_t recv;
  sl_redop_t redop;     /* ALLREDUCE, REDUCE, REDUCE_SCATTER */
  int32_t root;         /* BROADCAST, REDUCE */
  int32_t peer;         /* SEND, RECV */
  uint32_t tag;         /* SEND, RECV: user tag */
  int64_t timeout_ms;   /* the op must fail this long after it can start
                           (posting, or the end of the communicator's op
                           before it, which it runs after); <= 0: none */
} sl_op_t;

/* sl_op_t as first released in ABI v2: the smallest struct_size a plugin
 * accepts (SlValidateOp refuses a smaller one). */
#define SL_OP_MIN_SIZE (offsetof(sl_op_t, timeout_ms) + sizeof(int64_t))

/* A zeroed op of `kind` with struct_size set: start every op from it. */
static inline sl_op_t sl_op_init(sl_op_kind_t kind) {
  sl_op_t op;
  size_t i;
  for (i = 0; i < sizeof(op); ++i) ((unsigned char*)&op)[i] = 0;
  op.struct_size = (uint32_t)sizeof(sl_op_t);
  op.kind = kind;
  return op;
}

/*
 * Key-value store handed to a backend for bootstrap. Implemented by the core.
 * Values are opaque bytes. Keys are already scoped to the communicator.
 */
typedef struct sl_store {
  uint32_t struct_size; /* sizeof(sl_store_t) as the core was built */
  void* ctx;
  /* Inputs: key, value[len]. Outputs: err on failure. */
  sl_result_t (*set)(void* ctx, const char* key, const void* value, size_t len,
                     sl_error_t* err);
  /* Inputs: key, timeout_ms. Blocks until the key exists or the timeout.
   * Outputs: *value (free with free_value), *len. */
  sl_result_t (*get)(void* ctx, const char* key, int64_t timeout_ms,
                     void** value, size_t* len, sl_error_t* err);
  /* Inputs: value returned by get. */
  void (*free_value)(void* ctx, void* value);
  /* Inputs: key, delta. Outputs: *result, the value after adding. */
  sl_result_t (*add)(void* ctx, const char* key, int64_t delta,
                     int64_t* result, sl_error_t* err);
} sl_store_t;

/* Parameters for creating a communicator. */
typedef struct sl_comm_config {
  uint32_t struct_size;    /* sizeof(sl_comm_config_t) as its producer was built */
  int32_t rank;
  int32_t size;
  const sl_store_t* store; /* valid until comm_destroy returns */
  sl_device_type_t device;
  int32_t device_index;
  int64_t timeout_ms;      /* bootstrap deadline and default op deadline */
  uint64_t comm_id;        /* unique per communicator within the job */
  const char* options;     /* "key=value;..." backend options, may be NULL */
} sl_comm_config_t;

/* sl_comm_config_t as first released in ABI v2: the smallest struct_size a
 * backend accepts. */
#define SL_COMM_CONFIG_MIN_SIZE (offsetof(sl_comm_config_t, options) + sizeof(const char*))

/* What a backend can do. Bit i of a mask refers to enum value i. */
typedef struct sl_capabilities {
  uint32_t struct_size;       /* sizeof(sl_capabilities_t) as the plugin was built */
  uint32_t device_mask;       /* 1u << sl_device_type_t */
  uint32_t op_mask;           /* 1u << sl_op_kind_t */
  uint32_t dtype_mask;        /* dtypes for data movement */
  uint32_t reduce_op_count;   /* entries in reduce_dtype_mask: the plugin's
                                 SL_REDOP_COUNT; reduce ops beyond it are
                                 unsupported */
  const uint32_t* reduce_dtype_mask; /* [reduce_op_count]: dtypes per reduce op */
} sl_capabilities_t;

#define SL_CAPABILITIES_MIN_SIZE \
  (offsetof(sl_capabilities_t, reduce_dtype_mask) + sizeof(const uint32_t*))

/* The dtypes `caps` can reduce with `op` (0 for an op it does not list). */
static inline uint32_t sl_caps_reduce_dtypes(const sl_capabilities_t* caps,
                                             sl_redop_t op) {
  if (caps == NULL || caps->reduce_dtype_mask == NULL || (int)op < 0 ||
      (uint32_t)op >= caps->reduce_op_count) {
    return 0;
  }
  return caps->reduce_dtype_mask[op];
}

typedef struct sl_comm sl_comm_t;       /* opaque, owned by the plugin */
typedef struct sl_request sl_request_t; /* opaque, owned by the plugin */

typedef struct sl_backend_v2 {
  uint32_t abi_version; /* SL_ABI_VERSION */
  uint32_t struct_size; /* sizeof(sl_backend_v2_t) as the plugin was built */
  const char* name;     /* "gloo", "ucx", "nccl" */
  const char* version;  /* version of the plugin and its transport */
  const sl_capabilities_t* caps; /* lives as long as the table */
  /* The plugin's own state for this table, handed back as comm_create's
   * first argument (an interposer's next layer); may be NULL. Every other
   * entry reaches its state through the comm or request handle it gets. */
  void* ctx;

  /* Inputs: ctx (the table's), config. Outputs: *comm on success; err
   * otherwise. Blocks until every rank has joined or config->timeout_ms
   * has passed. */
  sl_result_t (*comm_create)(void* ctx, const sl_comm_config_t* config,
                             sl_comm_t** comm, sl_error_t* err);
  /* Inputs: comm. Frees it. Pending requests must have been freed. */
  void (*comm_destroy)(sl_comm_t* comm);
  /* Inputs: comm. Fails every pending request with SL_ERR_ABORTED and unblocks
   * every thread waiting on it. Safe from any thread; idempotent. */
  sl_result_t (*comm_abort)(sl_comm_t* comm, sl_error_t* err);
  /* Optional (may be NULL: the core then builds sub-groups with comm_create).
   * Inputs: parent, color (<0: not in any group), key, store (scoped to the
   * new group, valid until the child's comm_destroy returns, as comm_create's
   * store is; NULL when color < 0), new_comm_id (as config->comm_id).
   * Outputs: *child (NULL when color < 0). Collective over parent: every
   * rank of it calls, in the same order relative to its ops; the core posts
   * nothing on parent meanwhile. The child's ranks are ordered by (key,
   * parent rank), as the core's; it inherits the parent's device, timeout
   * and options. Parent and child may be destroyed in either order. */
  sl_result_t (*comm_split)(sl_comm_t* parent, int32_t color, int32_t key,
                            const sl_store_t* store, uint64_t new_comm_id,
                            sl_comm_t** child, sl_error_t* err);
  /* Inputs: comm, op. Starts the op without blocking on peers.
   * Outputs: *request on success. Validation errors return at once. */
  sl_result_t (*post)(sl_comm_t* comm, const sl_op_t* op,
                      sl_request_t** request, sl_error_t* err);
  /* Inputs: request. Outputs: *done = 1 when complete. Returns the op's
   * result once done (SL_OK while still running). Never blocks. */
  sl_result_t (*request_test)(sl_request_t* request, int* done,
                              sl_error_t* err);
  /* Inputs: request, timeout_ms (<0: forever). Blocks until the op completes
   * or the timeout. Returns the op's result, or SL_ERR_TIMEOUT when this wait
   * (not the op) ran out; the request may then be waited on again. */
  sl_result_t (*request_wait)(sl_request_t* request, int64_t timeout_ms,
                              sl_error_t* err);
  /* Inputs: request. Frees it. If still running, the plugin keeps whatever it
   * needs until the op ends (the caller's buffers must stay valid). */
  void (*request_free)(sl_request_t* request);
  /* Optional (NULL: the core waits on the host with request_wait instead).
   * Inputs: request, stream (a cudaStream_t of the op's device; NULL means
   * that device's legacy default stream). Makes `stream` wait for the op's
   * completion on the device and returns without blocking the host (a
   * device-side wait, as cudaStreamWaitEvent). Returns the op's result if it
   * has already ended (SL_OK when it succeeded); SL_OK when the wait was
   * queued; another code when `stream` cannot be made to wait (the op is
   * unaffected: the core then asks request_test whether the op ended). */
  sl_result_t (*request_stream_wait)(sl_request_t* request, void* stream,
                                     sl_error_t* err);
  /* ---- Appended after v2's first release: optional, see the policy. ---- */
} sl_backend_v2_t;

typedef sl_backend_v2_t sl_backend_t; /* the current version's table */

/* The required part of sl_backend_v2_t (up to `request_free`): the smallest
 * `struct_size` the loader accepts. Every entry after it is optional, and a
 * table may end before any of them (they then read as NULL). */
#define SL_BACKEND_V2_MIN_SIZE offsetof(sl_backend_v2_t, request_stream_wait)

/* True when `table` (of `struct_size` bytes) provides `field`, i.e. the field
 * lies wholly within the table; it may still be NULL. */
#define SL_BACKEND_HAS_FIELD(table, field) SL_HAS_FIELD(table, sl_backend_v2_t, field)

/* Interposer: receives the next layer's table and returns a wrapped one. */
typedef struct sl_interposer_v2 {
  uint32_t abi_version; /* SL_ABI_VERSION */
  uint32_t struct_size; /* sizeof(sl_interposer_v2_t) */
  const char* name;
  /* Inputs: next (outlives the wrapper). Outputs: *wrapped, owned by the
   * interposer and valid until the process exits. Each call may return a
   * new table (the same plugin may be stacked any number of times); its
   * `ctx` carries the state (next) of that layer. */
  sl_result_t (*wrap)(const sl_backend_v2_t* next,
                      const sl_backend_v2_t** wrapped, sl_error_t* err);
} sl_interposer_v2_t;

typedef sl_interposer_v2_t sl_interposer_t;

/* The entry points of this version; the loader tries them first. */
#define SL_BACKEND_ENTRY syncline_backend_plugin_v2
#define SL_INTERPOSER_ENTRY syncline_interposer_plugin_v2
#define SL_BACKEND_ENTRY_NAME "syncline_backend_plugin_v2"
#define SL_INTERPOSER_ENTRY_NAME "syncline_interposer_plugin_v2"

typedef const sl_backend_v2_t* (*sl_backend_entry_fn)(void);
typedef const sl_interposer_v2_t* (*sl_interposer_entry_fn)(void);

/* Size in bytes of one element of `dtype`, 0 for an invalid value. */
static inline size_t sl_dtype_size(sl_dtype_t dtype) {
  switch (dtype) {
    case SL_F32: case SL_I32: return 4;
    case SL_F64: case SL_I64: return 8;
    case SL_F16: case SL_BF16: return 2;
    case SL_I8: case SL_U8: return 1;
    default: return 0;
  }
}

/* The one table of names for the ABI's enums, used by the core, the plugin
 * SDK and every plugin's messages: "allreduce", "reduce_scatter", "f32",
 * "bf16", "sum", "avg". NULL for a value outside the enum (each caller says
 * what it prints instead). */
static inline const char* sl_op_kind_name(sl_op_kind_t kind) {
  switch (kind) {
    case SL_OP_ALLREDUCE: return "allreduce";
    case SL_OP_BROADCAST: return "broadcast";
    case SL_OP_REDUCE: return "reduce";
    case SL_OP_ALLGATHER: return "allgather";
    case SL_OP_REDUCE_SCATTER: return "reduce_scatter";
    case SL_OP_ALLTOALL: return "alltoall";
    case SL_OP_BARRIER: return "barrier";
    case SL_OP_SEND: return "send";
    case SL_OP_RECV: return "recv";
    default: return NULL;
  }
}

static inline const char* sl_dtype_name(sl_dtype_t dtype) {
  switch (dtype) {
    case SL_F32: return "f32";
    case SL_F64: return "f64";
    case SL_F16: return "f16";
    case SL_BF16: return "bf16";
    case SL_I8: return "i8";
    case SL_U8: return "u8";
    case SL_I32: return "i32";
    case SL_I64: return "i64";
    default: return NULL;
  }
}

static inline const char* sl_redop_name(sl_redop_t op) {
  switch (op) {
    case SL_SUM: return "sum";
    case SL_PROD: return "prod";
    case SL_MIN: return "min";
    case SL_MAX: return "max";
    case SL_AVG: return "avg";
    default: return NULL;
  }
}

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* SYNCLINE_PLUGIN_ABI_H_ */
