// collectives.cc: PyTorch's collectives over Syncline (see collectives.h).
#include "collectives.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <utility>

#include <c10/util/Exception.h>

#include "absl/time/time.h"
#include "tensor_args.h"
#include "torch_store.h"

namespace syncline::torch_backend {
namespace {

// A contiguous tensor with `t`'s elements: `t` itself, or a copy that the
// op copies back into `t` at the end when `copy_back` (for outputs).
at::Tensor Stage(const at::Tensor& t, bool copy_back, PendingOp& op) {
  at::Tensor c = t.contiguous();
  op.keep_alive.push_back(c);
  if (copy_back && !c.is_same(t)) {
    op.copy_back.push_back([t, c]() mutable { t.copy_(c); });
  }
  return c;
}

// All of `tensors`, flattened into one new contiguous 1-D tensor.
at::Tensor Flatten(const TensorList& tensors) {
  TensorList flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// A finish step copying consecutive blocks of `flat` into `outputs`.
std::function<void()> Unflatten(at::Tensor flat, TensorList outputs) {
  return [flat, outputs]() mutable {
    int64_t offset = 0;
    for (at::Tensor& out : outputs) {
      out.copy_(flat.narrow(0, offset, out.numel()).view(out.sizes()));
      offset += out.numel();
    }
  };
}

// Whether `blocks` are contiguous and lie back to back, in order, in one
// storage (as the chunks of one tensor do), and do not overlap `input`; if
// so, `*whole` views all of them as one buffer, and an allgather into it
// writes the blocks in place, with no staging buffer and no copies out. The
// view is made from the pointers, not as a tensor: a tensor over the storage
// (at::empty, then set_) cost 1.1 us a call here, a seventh of a 64 KiB
// allgather; the caller keeps blocks[0], and with it the storage, alive.
bool AdjacentBlocks(const TensorList& blocks, const at::Tensor& input, BufferView* whole) {
  if (blocks.empty()) return false;
  const at::Tensor& first = blocks[0];
  const int64_t elem = static_cast<int64_t>(first.element_size());
  const char* base = static_cast<const char*>(first.data_ptr());
  int64_t total = 0;  // elements so far
  for (const at::Tensor& b : blocks) {
    if (b.numel() == 0 || !b.is_contiguous() || b.scalar_type() != first.scalar_type() ||
        !b.storage().is_alias_of(first.storage()) ||
        static_cast<const char*>(b.data_ptr()) != base + total * elem) {
      return false;
    }
    total += b.numel();
  }
  const char* in = static_cast<const char*>(input.data_ptr());
  const int64_t in_bytes = input.numel() * static_cast<int64_t>(input.element_size());
  if (in < base + total * elem && base < in + in_bytes) return false;
  *whole = View(first.data_ptr(), static_cast<size_t>(total),
                DataTypeFor(first.scalar_type(), "allgather"));
  return true;
}

at::Tensor SameDtypeAs(const TensorList& tensors, const char* name) {
  TORCH_CHECK(!tensors.empty(), "syncline: ", name, " got no tensors");
  for (const at::Tensor& t : tensors) {
    CheckTensor(t, name);
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "syncline: ", name,
                " needs tensors of one dtype, got ", tensors[0].scalar_type(),
                " and ", t.scalar_type());
  }
  return tensors[0];
}

}  // namespace

Collectives::Collectives(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                         std::chrono::milliseconds timeout) {
  CommunicatorOptions options;
  options.rank = rank;
  options.world_size = size;
  options.store = MakeTorchStore(std::move(store));
  options.timeout = absl::FromChrono(timeout);
  auto comm = Communicator::Create(options);
  TORCH_CHECK(comm.ok(), "syncline: creating the process group (rank ", rank, " of ",
              size, ") failed: ", comm.status().message());
  comm_ = std::move(comm).value();
  completer_ = std::make_shared<Completer>();
}

Collectives::~Collectives() { Close(); }

void Collectives::Close() {
  for (auto& posted : posted_) {
    if (auto work = posted.lock()) work->Complete();
  }
  posted_.clear();
  completer_->Stop();  // the dropped ones, and the Futures' queue
}

ReduceOp Collectives::Reduction(const c10d::ReduceOp& op, const at::Tensor& t,
                                const char* name) const {
  ReduceOp r = ReduceOpFor(op, t.scalar_type(), name);
  DataType dt = DataTypeFor(t.scalar_type(), name);
  TORCH_CHECK(comm_->SupportsReduce(dt, r, Device::Cpu()), "syncline: ", name, " with ",
              ReduceOpName(r), " on ", c10::toString(t.scalar_type()),
              " is not supported by Syncline's backend ", comm_->backend_name());
  return r;
}

at::Tensor Collectives::Scratch(int64_t numel, at::ScalarType dtype) {
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  // Only scratch_ holds the storage once the last op that used it has ended
  // (whoever completes a Work drops its buffers first), and only this
  // thread hands out new references, so a count of 1 stays 1.
  if (!scratch_.defined() || scratch_.storage().use_count() != 1 ||
      scratch_.numel() < bytes) {
    if (scratch_.defined() && scratch_.storage().use_count() != 1) {
      return at::empty({numel}, at::TensorOptions().dtype(dtype));  // still in use
    }
    scratch_ = at::empty({bytes}, at::kByte);
  }
  return scratch_.narrow(0, 0, bytes).view(dtype);
}

void Collectives::Post(absl::StatusOr<std::unique_ptr<syncline::Work>> posted,
                       PendingOp& op) {
  TORCH_CHECK(posted.ok(), "syncline: ", posted.status().message());
  op.works.push_back(std::move(posted).value());
}

WorkPtr Collectives::Launch(c10d::OpType type, const char* name, TensorList outputs,
                            PendingOp op) {
  auto work = c10::make_intrusive<TorchWork>(rank(), type, name, std::move(outputs),
                                             std::move(op), completer_);
  auto ended = [](const c10::weak_intrusive_ptr<TorchWork>& posted) {
    auto w = posted.lock();
    return !w || w->completed();
  };
  while (!posted_.empty() && ended(posted_.front())) posted_.pop_front();
  // A Work kept and never waited for holds the front; sweep behind it now
  // and then, so that the list stays as long as the Works that run.
  if (posted_.size() >= compact_at_) {
    posted_.erase(std::remove_if(posted_.begin(), posted_.end(), ended), posted_.end());
    compact_at_ = std::max<size_t>(64, 2 * posted_.size());
  }
  posted_.emplace_back(work);
  return work;
}

WorkPtr Collectives::Broadcast(TensorList& tensors, const c10d::BroadcastOptions& o) {
  const at::Tensor& t = SingleTensor(tensors, "broadcast");
  TORCH_CHECK(o.rootTensor == 0, "syncline: broadcast takes one tensor; rootTensor must be 0");
  PendingOp op;
  BroadcastOptions options;
  options.root = static_cast<int>(o.rootRank);
  options.timeout = TimeoutFrom(o.timeout);
  Post(comm_->Broadcast(ViewOf(Stage(t, true, op)), options), op);
  return Launch(c10d::OpType::BROADCAST, "broadcast", tensors, std::move(op));
}

WorkPtr Collectives::Allreduce(TensorList& tensors, const c10d::AllreduceOptions& o) {
  const at::Tensor& t = SingleTensor(tensors, "allreduce");
  AllreduceOptions options;
  options.op = Reduction(o.reduceOp, t, "allreduce");
  options.timeout = TimeoutFrom(o.timeout);
  PendingOp op;
  Post(comm_->Allreduce(ViewOf(Stage(t, true, op)), options), op);
  return Launch(c10d::OpType::ALLREDUCE, "allreduce", tensors, std::move(op));
}

WorkPtr Collectives::AllreduceCoalesced(TensorList& tensors,
                                        const c10d::AllreduceCoalescedOptions& o) {
  const at::Tensor like = SameDtypeAs(tensors, "allreduce_coalesced");
  AllreduceOptions options;
  options.op = Reduction(o.reduceOp, like, "allreduce_coalesced");
  options.timeout = TimeoutFrom(o.timeout);
  PendingOp op;
  at::Tensor flat = Flatten(tensors);
  op.keep_alive.push_back(flat);
  Post(comm_->Allreduce(ViewOf(flat), options), op);
  op.finish.push_back(Unflatten(flat, tensors));
  return Launch(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors,
                std::move(op));
}

WorkPtr Collectives::Reduce(TensorList& tensors, const c10d::ReduceOptions& o) {
  const at::Tensor& t = SingleTensor(tensors, "reduce");
  TORCH_CHECK(o.rootTensor == 0, "syncline: reduce takes one tensor; rootTensor must be 0");
  ReduceOptions options;
  options.op = Reduction(o.reduceOp, t, "reduce");
  options.root = static_cast<int>(o.rootRank);
  options.timeout = TimeoutFrom(o.timeout);
  PendingOp op;
  BufferView v = ViewOf(Stage(t, rank() == options.root, op));
  Post(comm_->Reduce(v, v, options), op);
  return Launch(c10d::OpType::REDUCE, "reduce", tensors, std::move(op));
}

WorkPtr Collectives::AllgatherInto(const at::Tensor& in, TensorList results,
                                   std::chrono::milliseconds timeout, c10d::OpType type,
                                   const char* name) {
  AllgatherOptions options;
  options.timeout = TimeoutFrom(timeout);
  PendingOp op;
  BufferView whole;
  const bool in_place = AdjacentBlocks(results, in, &whole);
  at::Tensor flat;
  if (in_place) {
    op.keep_alive.push_back(results[0]);  // and so the storage of every block
  } else {
    flat = Scratch(size() * in.numel(), in.scalar_type());
    op.keep_alive.push_back(flat);
    whole = ViewOf(flat);
  }
  Post(comm_->Allgather(ViewOf(Stage(in, false, op)), whole, options), op);
  if (!in_place && !results.empty()) op.finish.push_back(Unflatten(flat, results));
  return Launch(type, name, results, std::move(op));
}

WorkPtr Collectives::Allgather(TensorLists& outputs, TensorList& inputs,
                               const c10d::AllgatherOptions& o) {
  const at::Tensor& in = SingleTensor(inputs, "allgather");
  return AllgatherInto(in, RankBlocks(outputs, in, size(), true, "allgather"), o.timeout,
                       c10d::OpType::ALLGATHER, "allgather");
}

WorkPtr Collectives::AllgatherCoalesced(TensorLists& output_lists, TensorList& inputs,
                                        const c10d::AllgatherOptions& o) {
  SameDtypeAs(inputs, "allgather_coalesced");
  TORCH_CHECK(static_cast<int>(output_lists.size()) == size(), "syncline: ",
              "allgather_coalesced needs ", size(), " output lists (one per rank), got ",
              output_lists.size());
  // Rank r's flattened inputs land in block r, in the order of output_lists[r].
  TensorList results;
  for (TensorList& list : output_lists) {
    TORCH_CHECK(list.size() == inputs.size(), "syncline: allgather_coalesced needs ",
                inputs.size(), " tensors in each output list, got ", list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      CheckSameShape({list[i]}, inputs[i], "allgather_coalesced");
      results.push_back(list[i]);
    }
  }
  return AllgatherInto(Flatten(inputs), results, o.timeout, c10d::OpType::ALLGATHER_COALESCED,
                       "allgather_coalesced");
}

WorkPtr Collectives::AllgatherBase(at::Tensor& output, at::Tensor& input,
                                   const c10d::AllgatherOptions& o) {
  CheckFlatBlocks(output, input, size(), "output", "_allgather_base");
  AllgatherOptions options;
  options.timeout = TimeoutFrom(o.timeout);
  PendingOp op;
  Post(comm_->Allgather(ViewOf(Stage(input, false, op)), ViewOf(Stage(output, true, op)),
                        options),
       op);
  return Launch(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output}, std::move(op));
}

WorkPtr Collectives::Gather(TensorLists& outputs, TensorList& inputs,
                            const c10d::GatherOptions& o) {
  const at::Tensor& in = SingleTensor(inputs, "gather");
  const bool is_root = rank() == o.rootRank;
  return AllgatherInto(in, RankBlocks(outputs, in, size(), is_root, "gather"), o.timeout,
                       c10d::OpType::GATHER, "gather");
}

WorkPtr Collectives::Scatter(TensorList& outputs, TensorLists& inputs,
                             const c10d::ScatterOptions& o) {
  const at::Tensor& out = SingleTensor(outputs, "scatter");
  const bool is_root = rank() == o.rootRank;
  TensorList blocks = RankBlocks(inputs, out, size(), is_root, "scatter");
  BroadcastOptions options;
  options.root = static_cast<int>(o.rootRank);
  options.timeout = TimeoutFrom(o.timeout);
  PendingOp op;
  at::Tensor flat = is_root ? Flatten(blocks) : at::empty({size() * out.numel()}, out.options());
  op.keep_alive.push_back(flat);
  Post(comm_->Broadcast(ViewOf(flat), options), op);
  op.finish.push_back([flat, out, me = rank()]() mutable {
    out.copy_(flat.narrow(0, me * out.numel(), out.numel()).view(out.sizes()));
  });
  return Launch(c10d::OpType::SCATTER, "scatter", outputs, std::move(op));
}

WorkPtr Collectives::ReduceScatter(TensorList& outputs, TensorLists& inputs,
                                   const c10d::ReduceScatterOptions& o) {
  const at::Tensor& out = SingleTensor(outputs, "reduce_scatter");
  TensorList blocks = RankBlocks(inputs, out, size(), true, "reduce_scatter");
  ReduceScatterOptions options;
  options.op = Reduction(o.reduceOp, out, "reduce_scatter");
  options.timeout = TimeoutFrom(o.timeout);
  PendingOp op;
  at::Tensor flat = Flatten(blocks);
  op.keep_alive.push_back(flat);
  Post(comm_->ReduceScatter(ViewOf(flat), ViewOf(Stage(out, true, op)), options), op);
  return Launch(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs, std::move(op));
}

WorkPtr Collectives::ReduceScatterBase(at::Tensor& output, at::Tensor& input,
                                       const c10d::ReduceScatterOptions& o) {
  CheckFlatBlocks(input, output, size(), "input", "_reduce_scatter_base");
  ReduceScatterOptions options;
  options.op = Reduction(o.reduceOp, output, "_reduce_scatter_base");
  options.timeout = TimeoutFrom(o.timeout);
  PendingOp op;
  Post(comm_->ReduceScatter(ViewOf(Stage(input, false, op)), ViewOf(Stage(output, true, op)),
                            options),
       op);
  return Launch(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output},
                std::move(op));
}

void Collectives::AlltoallV(const at::Tensor& out, const at::Tensor& in,
                            const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& recv_counts, absl::Duration timeout,
                            PendingOp& op) {
  const int n = size();
  // Row i of `all`: rank i's send counts, then its receive counts.
  at::Tensor mine = at::empty({2 * n}, at::kLong);
  for (int j = 0; j < n; ++j) {
    mine[j] = send_counts[j];
    mine[n + j] = recv_counts[j];
  }
  at::Tensor all = at::empty({n * 2 * n}, at::kLong);
  AllgatherOptions counts_options;
  counts_options.timeout = timeout;
  auto counted = comm_->Allgather(ViewOf(mine), ViewOf(all), counts_options);
  TORCH_CHECK(counted.ok(), "syncline: alltoall: ", counted.status().message());
  absl::Status waited = (*counted)->Wait();
  TORCH_CHECK(waited.ok(), "syncline: alltoall: ", waited.message());
  const int64_t* c = all.data_ptr<int64_t>();
  int64_t block = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const int64_t sent = c[i * 2 * n + j], expected = c[j * 2 * n + n + i];
      // Every rank sees the same counts, so every rank raises the same error.
      TORCH_CHECK(sent == expected, "syncline: alltoall split sizes disagree: rank ", i,
                  " sends ", sent, " elements to rank ", j, ", which expects ", expected);
      block = std::max(block, sent);
    }
  }
  if (block == 0) return;
  at::Tensor send = at::zeros({n * block}, in.options());
  at::Tensor recv = at::empty({n * block}, in.options());
  for (int j = 0, offset = 0; j < n; offset += send_counts[j], ++j) {
    send.narrow(0, j * block, send_counts[j]).copy_(in.narrow(0, offset, send_counts[j]));
  }
  op.keep_alive.insert(op.keep_alive.end(), {send, recv, out});
  AlltoallOptions options;
  options.timeout = timeout;
  Post(comm_->Alltoall(ViewOf(send), ViewOf(recv), options), op);
  op.finish.push_back([out, recv, block, recv_counts]() mutable {
    int64_t offset = 0;
    for (size_t i = 0; i < recv_counts.size(); offset += recv_counts[i], ++i) {
      out.narrow(0, offset, recv_counts[i]).copy_(recv.narrow(0, i * block, recv_counts[i]));
    }
  });
}

WorkPtr Collectives::AlltoallBase(at::Tensor& output, at::Tensor& input,
                                  std::vector<int64_t>& output_split_sizes,
                                  std::vector<int64_t>& input_split_sizes,
                                  const c10d::AllToAllOptions& o) {
  CheckTensor(input, "alltoall_base");
  CheckTensor(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "syncline: alltoall_base needs ",
              "input and output of one dtype, got ", input.scalar_type(), " and ",
              output.scalar_type());
  const int n = size();
  // Split sizes count rows (dim 0); Syncline counts elements.
  auto counts = [n](const at::Tensor& t, const std::vector<int64_t>& splits,
                    const char* which) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> out(n);
    if (splits.empty()) {
      TORCH_CHECK(rows % n == 0, "syncline: alltoall_base: the ", which, " has ", rows,
                  " rows, not a multiple of the world size ", n);
      std::fill(out.begin(), out.end(), rows / n * row);
      return out;
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == n, "syncline: alltoall_base: ", which,
                " split sizes name ", splits.size(), " ranks, not ", n);
    TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows,
                "syncline: alltoall_base: ", which, " split sizes do not add up to its ",
                rows, " rows");
    for (int i = 0; i < n; ++i) out[i] = splits[i] * row;
    return out;
  };
  std::vector<int64_t> send_counts = counts(input, input_split_sizes, "input");
  std::vector<int64_t> recv_counts = counts(output, output_split_sizes, "output");
  PendingOp op;
  at::Tensor in = Stage(input, false, op).reshape({-1});
  at::Tensor out = Stage(output, true, op).reshape({-1});
  AlltoallV(out, in, send_counts, recv_counts, TimeoutFrom(o.timeout), op);
  return Launch(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, std::move(op));
}

WorkPtr Collectives::Alltoall(TensorList& outputs, TensorList& inputs,
                              const c10d::AllToAllOptions& o) {
  const int n = size();
  TORCH_CHECK(static_cast<int>(inputs.size()) == n && static_cast<int>(outputs.size()) == n,
              "syncline: alltoall needs ", n, " input and ", n, " output tensors");
  const at::Tensor like = SameDtypeAs(inputs, "alltoall");
  TORCH_CHECK(SameDtypeAs(outputs, "alltoall").scalar_type() == like.scalar_type(),
              "syncline: alltoall needs inputs and outputs of one dtype");
  std::vector<int64_t> send_counts, recv_counts;
  for (int i = 0; i < n; ++i) {
    send_counts.push_back(inputs[i].numel());
    recv_counts.push_back(outputs[i].numel());
  }
  PendingOp op;
  at::Tensor in = Flatten(inputs);
  at::Tensor out = at::empty({std::accumulate(recv_counts.begin(), recv_counts.end(),
                                              int64_t{0})},
                             like.options());
  op.keep_alive.push_back(in);
  AlltoallV(out, in, send_counts, recv_counts, TimeoutFrom(o.timeout), op);
  op.finish.push_back(Unflatten(out, outputs));
  return Launch(c10d::OpType::ALLTOALL, "alltoall", outputs, std::move(op));
}

WorkPtr Collectives::Barrier(const c10d::BarrierOptions& o) {
  BarrierOptions options;
  options.timeout = TimeoutFrom(o.timeout);
  PendingOp op;
  Post(comm_->Barrier(options), op);
  return Launch(c10d::OpType::BARRIER, "barrier", {}, std::move(op));
}

WorkPtr Collectives::Send(TensorList& tensors, int dst, int tag) {
  return PointToPoint(tensors, dst, tag, /*send=*/true);
}

WorkPtr Collectives::Recv(TensorList& tensors, int src, int tag) {
  return PointToPoint(tensors, src, tag, /*send=*/false);
}

double Collectives::TimeOps(const std::string& op, const at::Tensor& buffer,
                            const at::Tensor& output, int64_t iters) {
  for (const at::Tensor* t : {&buffer, &output}) {
    CheckTensor(*t, "_time_ops");
    TORCH_CHECK(t->is_contiguous() && t->scalar_type() == at::kFloat,
                "syncline: _time_ops takes contiguous float32 tensors");
  }
  TORCH_CHECK(iters >= 1, "syncline: _time_ops needs at least 1 op, got ", iters);
  const BufferView view = ViewOf(buffer);
  std::function<absl::StatusOr<std::unique_ptr<Work>>()> post;
  if (op == "allreduce") {
    post = [&] { return comm_->Allreduce(view, AllreduceOptions{}); };
  } else if (op == "allgather") {
    TORCH_CHECK(output.numel() == buffer.numel() * size(), "syncline: _time_ops allgather: ",
                "output must hold ", size(), " blocks of ", buffer.numel(), " elements");
    const BufferView out = ViewOf(output);
    post = [this, view, out] { return comm_->Allgather(view, out, AllgatherOptions{}); };
  } else if (op == "broadcast") {
    post = [&] { return comm_->Broadcast(view, BroadcastOptions{}); };
  } else {
    TORCH_CHECK(false, "syncline: _time_ops: op must be allreduce, allgather or broadcast, "
                       "not '", op, "'");
  }
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) {
    auto work = post();
    TORCH_CHECK(work.ok(), "syncline: _time_ops ", op, ": ", work.status().message());
    const absl::Status done = (*work)->Wait();
    TORCH_CHECK(done.ok(), "syncline: _time_ops ", op, ": ", done.message());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

WorkPtr Collectives::PointToPoint(TensorList& tensors, int peer, int tag, bool send) {
  const char* name = send ? "send" : "recv";
  const at::Tensor& t = SingleTensor(tensors, name);
  TORCH_CHECK(tag >= 0, "syncline: ", name, " tags must be non-negative, got ", tag);
  SendRecvOptions options;
  options.tag = static_cast<uint32_t>(tag);
  PendingOp op;
  BufferView v = ViewOf(Stage(t, /*copy_back=*/!send, op));
  Post(send ? comm_->Send(v, peer, options) : comm_->Recv(v, peer, options), op);
  return Launch(send ? c10d::OpType::SEND : c10d::OpType::RECV, name, tensors, std::move(op));
}

}  // namespace syncline::torch_backend
