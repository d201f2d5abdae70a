// communicator_ops.cc: validation and posting of ops, and Split.
//
// Validation happens here, once, for every backend: counts that do not fit
// the op, roots and peers out of range, a device or dtype the backend lacks.
// Each error names the op and its sequence number.
#include <algorithm>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend_catalog.h"
#include "communicator_impl.h"
#include "loader.h"
#include "store_adapter.h"
#include "syncline/communicator.h"
#include "syncline/plugin_sdk/op_format.h"
#include "syncline/status.h"
#include "work_impl.h"

namespace syncline {

static_assert(Communicator::kP2pSeqBit == SL_SEQ_P2P_BIT,
              "the p2p bit is the one plugin_abi.h reserves");

namespace {

bool HasBit(uint32_t mask, int bit) { return (mask >> bit) & 1u; }

std::string DeviceNames(uint32_t mask) {
  std::vector<std::string> names;
  if (HasBit(mask, SL_DEVICE_CPU)) names.push_back("cpu");
  if (HasBit(mask, SL_DEVICE_CUDA)) names.push_back("cuda");
  return absl::StrJoin(names, ", ");
}

std::string DtypeNames(uint32_t mask) {
  std::vector<std::string> names;
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (HasBit(mask, i)) names.push_back(DataTypeName(static_cast<DataType>(i)));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Work>> Communicator::Post(
    int kind, BufferView send, BufferView recv, int redop, int root, int peer,
    uint32_t tag, absl::Duration timeout) {
  std::lock_guard<std::mutex> lock(impl_->post_mu);
  const sl_op_kind_t op_kind = static_cast<sl_op_kind_t>(kind);
  const char* kind_name = sl_op_kind_name(op_kind);
  if (kind_name == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown op kind ", kind));
  // Point-to-point ops need not be issued alike on every rank, so they must
  // not shift the collectives' numbering.
  const bool p2p = op_kind == SL_OP_SEND || op_kind == SL_OP_RECV;
  const uint64_t seq = p2p ? (kP2pSeqBit | next_p2p_seq_++) : next_seq_++;
  const bool reduces = op_kind == SL_OP_ALLREDUCE || op_kind == SL_OP_REDUCE ||
                       op_kind == SL_OP_REDUCE_SCATTER;
  const BufferView& data = op_kind == SL_OP_RECV || op_kind == SL_OP_BROADCAST ? recv : send;
  // The op's description, put into words only for an error, Describe() or
  // the flight recorder's readers (op_label.h).
  internal::OpLabel label;
  label.seq = seq;
  label.kind = op_kind;
  label.dtype = static_cast<int>(data.dtype);
  label.count = data.count;
  label.redop = redop;
  label.root = root;
  label.peer = peer;
  label.tag = tag;
  label.where = &impl_->recorder->where();
  sl_op_t op = sl_op_init(op_kind);
  op.seq = seq;
  op.send = sl_buffer_t{send.data, send.count, static_cast<sl_dtype_t>(send.dtype),
                        static_cast<sl_device_type_t>(send.device.type), send.device.index,
                        send.stream};
  op.recv = sl_buffer_t{recv.data, recv.count, static_cast<sl_dtype_t>(recv.dtype),
                        static_cast<sl_device_type_t>(recv.device.type), recv.device.index,
                        recv.stream};
  op.redop = static_cast<sl_redop_t>(redop);
  op.root = root;
  op.peer = peer;
  op.tag = tag;
  auto invalid = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(label.ToString(), ": ", why));
  };

  // Shape checks.
  const size_t n = send.count, m = recv.count;
  switch (op_kind) {
    case SL_OP_ALLREDUCE:
      if (n != m) return invalid(absl::StrFormat("send has %d elements but recv has %d; they must match", n, m));
      break;
    case SL_OP_REDUCE:
      if (rank_ == root && n != m) return invalid(absl::StrFormat("send has %d elements but the root's recv has %d", n, m));
      break;
    case SL_OP_ALLGATHER:
      if (m != n * size_) return invalid(absl::StrFormat("recv must hold send.count * size = %d elements, it holds %d", n * size_, m));
      break;
    case SL_OP_REDUCE_SCATTER:
      if (n != m * size_) return invalid(absl::StrFormat("send must hold recv.count * size = %d elements, it holds %d", m * size_, n));
      break;
    case SL_OP_ALLTOALL:
      if (n != m || n % size_ != 0) return invalid(absl::StrFormat("send (%d) and recv (%d) must have the same count, a multiple of the world size %d", n, m, size_));
      break;
    default:
      break;
  }
  if ((op_kind == SL_OP_BROADCAST || op_kind == SL_OP_REDUCE) && (root < 0 || root >= size_)) {
    return invalid(absl::StrFormat("root %d is not a rank of this communicator (0..%d)", root, size_ - 1));
  }
  if (op_kind == SL_OP_SEND || op_kind == SL_OP_RECV) {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return invalid(absl::StrFormat("peer %d must be another rank of this communicator (0..%d)", peer, size_ - 1));
    }
  }
  for (const BufferView* b : {&send, &recv}) {
    if (b->count > 0 && b->data == nullptr) return invalid("a buffer has elements but a null pointer");
  }
  if (send.count > 0 && recv.count > 0 && send.dtype != recv.dtype &&
      op_kind != SL_OP_SEND && op_kind != SL_OP_RECV) {
    return invalid(absl::StrFormat("send is %s but recv is %s; use one dtype",
                                   DataTypeName(send.dtype), DataTypeName(recv.dtype)));
  }

  // Capability checks: fail clearly rather than compute something wrong.
  const sl_capabilities_t& caps = *impl_->table->caps;
  const uint32_t reduce_dtypes = sl_caps_reduce_dtypes(&caps, static_cast<sl_redop_t>(redop));
  if (op_kind != SL_OP_BARRIER && data.count > 0) {
    if (!HasBit(caps.device_mask, static_cast<int>(data.device.type))) {
      return invalid(absl::StrFormat(
          "the buffer is on %s, but backend %s handles %s buffers only; use a "
          "communicator whose backend accepts %s buffers (SYNCLINE_BACKEND=%s)",
          data.device.ToString(), impl_->name, DeviceNames(caps.device_mask),
          data.device.is_cuda() ? "cuda" : "cpu", internal::BackendsFor(data.device.is_cuda())));
    }
    if (!HasBit(caps.dtype_mask, static_cast<int>(data.dtype))) {
      return absl::UnimplementedError(absl::StrCat(
          label.ToString(), ": backend ", impl_->name, " does not support dtype ",
          DataTypeName(data.dtype), "; supported: ", DtypeNames(caps.dtype_mask)));
    }
  }
  if (!HasBit(caps.op_mask, kind)) {
    return absl::UnimplementedError(absl::StrCat(label.ToString(), ": backend ", impl_->name,
                                                 " does not implement ", kind_name));
  }
  if (reduces && !HasBit(reduce_dtypes, static_cast<int>(data.dtype))) {
    return absl::UnimplementedError(absl::StrCat(
        label.ToString(), ": backend ", impl_->name, " cannot reduce ", DataTypeName(data.dtype),
        " with ", ReduceOpName(static_cast<ReduceOp>(redop)), "; it can for: ",
        DtypeNames(reduce_dtypes)));
  }

  absl::Duration deadline = timeout > absl::ZeroDuration() ? timeout : timeout_;
  op.timeout_ms = absl::ToInt64Milliseconds(deadline);
  sl_request_t* request = nullptr;
  sl_error_t err;
  internal::ClearForCall(err);
  impl_->recorder->Posted(label, data.bytes());
  sl_result_t r = impl_->table->post(impl_->backend->comm(), &op, &request, &err);
  if (r != SL_OK) {
    impl_->recorder->Finished(seq, false, err.message);
    return absl::Status(internal::ToStatusCode(r),
                        absl::StrCat(label.ToString(), " failed: ", err.message));
  }
  return std::unique_ptr<Work>(
      std::make_unique<internal::PluginWork>(impl_->backend, request, label));
}

absl::StatusOr<std::unique_ptr<Work>> Communicator::Allreduce(
    BufferView buffer, const AllreduceOptions& o) {
  return Post(SL_OP_ALLREDUCE, buffer, buffer, static_cast<int>(o.op), 0, -1, 0, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::Allreduce(
    BufferView send, BufferView recv, const AllreduceOptions& o) {
  return Post(SL_OP_ALLREDUCE, send, recv, static_cast<int>(o.op), 0, -1, 0, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::Broadcast(
    BufferView buffer, const BroadcastOptions& o) {
  return Post(SL_OP_BROADCAST, buffer, buffer, 0, o.root, -1, 0, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::Reduce(
    BufferView send, BufferView recv, const ReduceOptions& o) {
  return Post(SL_OP_REDUCE, send, recv, static_cast<int>(o.op), o.root, -1, 0, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::Allgather(
    BufferView send, BufferView recv, const AllgatherOptions& o) {
  return Post(SL_OP_ALLGATHER, send, recv, 0, 0, -1, 0, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::ReduceScatter(
    BufferView send, BufferView recv, const ReduceScatterOptions& o) {
  return Post(SL_OP_REDUCE_SCATTER, send, recv, static_cast<int>(o.op), 0, -1, 0, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::Alltoall(
    BufferView send, BufferView recv, const AlltoallOptions& o) {
  return Post(SL_OP_ALLTOALL, send, recv, 0, 0, -1, 0, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::Barrier(const BarrierOptions& o) {
  return Post(SL_OP_BARRIER, BufferView{}, BufferView{}, 0, 0, -1, 0, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::Send(
    BufferView buffer, int peer, const SendRecvOptions& o) {
  return Post(SL_OP_SEND, buffer, BufferView{}, 0, 0, peer, o.tag, o.timeout);
}
absl::StatusOr<std::unique_ptr<Work>> Communicator::Recv(
    BufferView buffer, int peer, const SendRecvOptions& o) {
  return Post(SL_OP_RECV, BufferView{}, buffer, 0, 0, peer, o.tag, o.timeout);
}

namespace {

// Child communicator ids come from one counter in the job's root store, so
// no two children of any communicator in the job share an id (a formula of
// parent id, split number and color cannot promise that: with
// id*1000003 + split*1009 + color, split 1 with color 1009 equalled split 2
// with color 0). The group's new rank 0 draws the id and publishes it to its
// group; the top bit keeps child ids apart from the process-local ids of
// communicators made by Create().
constexpr uint64_t kSplitIdBit = 1ull << 63;

absl::StatusOr<uint64_t> AllocateSplitId(Store& root, Store& group, bool leader,
                                         absl::Duration timeout) {
  if (leader) {
    SL_ASSIGN_OR_RETURN(int64_t n, root.Add("syncline/split_ids", 1));
    const uint64_t id = kSplitIdBit | static_cast<uint64_t>(n);
    SL_RETURN_IF_ERROR(group.Set("id", absl::StrCat(id)));
    return id;
  }
  SL_ASSIGN_OR_RETURN(std::string text, group.Get("id", timeout));
  uint64_t id = 0;
  if (!absl::SimpleAtoi(text, &id) || (id & kSplitIdBit) == 0) {
    return absl::DataLossError(
        absl::StrCat("split: the group's communicator id in the store is malformed: '", text,
                     "'"));
  }
  return id;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Split(int color, int key) {
  // Everyone learns everyone's (color, key) through the store, so that Split
  // works on any device (a CUDA-only backend has no CPU allgather).
  const int split_index = ++impl_->splits;
  const std::string prefix = absl::StrCat("split", split_index, "/");
  SL_RETURN_IF_ERROR(store_->Set(absl::StrCat(prefix, rank_), absl::StrCat(color, " ", key)));
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(absl::StrCat(prefix, r));
  absl::Status waited = store_->Wait(keys, timeout_);
  if (!waited.ok()) {
    return absl::Status(waited.code(), absl::StrFormat("split #%d on rank %d/%d: not every "
                                                       "rank called Split: %s",
                                                       split_index, rank_, size_,
                                                       waited.message()));
  }
  std::vector<int64_t> all(2 * size_);
  for (int r = 0; r < size_; ++r) {
    SL_ASSIGN_OR_RETURN(std::string v, store_->Get(keys[r], timeout_));
    std::pair<std::string, std::string> parts = absl::StrSplit(v, ' ');
    if (!absl::SimpleAtoi(parts.first, &all[2 * r]) ||
        !absl::SimpleAtoi(parts.second, &all[2 * r + 1])) {
      return absl::DataLossError(absl::StrCat("split: malformed entry from rank ", r, ": ", v));
    }
  }
  std::vector<std::pair<int64_t, int>> members;  // (key, old rank)
  for (int r = 0; r < size_; ++r) {
    if (color >= 0 && all[2 * r] == color) members.push_back({all[2 * r + 1], r});
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == rank_) new_rank = static_cast<int>(i);
  }
  const int new_size = static_cast<int>(members.size());
  auto scoped = MakePrefixStore(
      absl::StrCat("comm", impl_->comm_id, "/split", split_index, "/color", color),
      impl_->root_store);
  uint64_t child_id = 0;
  if (color >= 0) {
    SL_ASSIGN_OR_RETURN(child_id, AllocateSplitId(*impl_->root_store, *scoped,
                                                  /*leader=*/new_rank == 0, timeout_));
  }
  auto impl = std::make_unique<Impl>();
  impl->table = impl_->table;
  impl->name = impl_->name;
  impl->comm_id = child_id;
  impl->root_store = impl_->root_store;
  impl->backend_options = impl_->backend_options;
  impl->backend_options_variable = impl_->backend_options_variable;
  if (impl_->table->comm_split != nullptr) {
    // The backend splits the parent itself (e.g. UCX reuses its endpoints);
    // it is collective over the parent, so ranks outside every group call it too.
    absl::Status split = internal::SplitBackendComm(
        *impl_, *impl, color, key, color < 0 ? nullptr : MakePrefixStore("plugin", scoped));
    if (!split.ok()) {
      return absl::Status(split.code(),
                          absl::StrFormat("split #%d (color %d) on rank %d/%d over %s: %s",
                                          split_index, color, rank_, size_, impl_->name,
                                          split.message()));
    }
    if (color < 0) return std::unique_ptr<Communicator>();
  } else {
    if (color < 0) return std::unique_ptr<Communicator>();
    SL_RETURN_IF_ERROR(internal::CreateBackendComm(*impl, new_rank, new_size,
                                                   MakePrefixStore("plugin", scoped), device_,
                                                   timeout_));
  }
  impl->recorder = std::make_shared<internal::FlightRecorder>(new_rank, new_size, child_id,
                                                              scoped, impl->name);
  impl->backend->set_recorder(impl->recorder);
  return std::unique_ptr<Communicator>(new Communicator(
      std::move(impl), new_rank, new_size, device_, timeout_, scoped));
}

}  // namespace syncline
