// process_group.cc: c10d::ProcessGroup (torch 1.13) over Collectives.
//
// Every override forwards; what PyTorch's base class does not implement
// itself and Syncline lacks (recvAnysource) raises an error that names it.
#include "process_group.h"

#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/utils/pybind.h>

#include "collectives.h"

namespace syncline::torch_backend {
namespace {

class ProcessGroupSyncline : public c10d::ProcessGroup {
 public:
  ProcessGroupSyncline(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout)
      : c10d::ProcessGroup(rank, size), collectives_(store, rank, size, timeout) {}

  // The last reference often goes from Python, with the GIL held, while a
  // Future callback written in Python (or its release) on the Completer's
  // thread needs the GIL to end: Close() waits for that thread.
  ~ProcessGroupSyncline() override {
    if (PyGILState_Check()) {
      pybind11::gil_scoped_release no_gil;
      collectives_.Close();
    } else {
      collectives_.Close();
    }
  }

  const std::string getBackendName() const override { return "syncline"; }

  WorkPtr broadcast(TensorList& t, const c10d::BroadcastOptions& o) override {
    return collectives_.Broadcast(t, o);
  }
  WorkPtr allreduce(TensorList& t, const c10d::AllreduceOptions& o) override {
    return collectives_.Allreduce(t, o);
  }
  WorkPtr allreduce_coalesced(TensorList& t,
                              const c10d::AllreduceCoalescedOptions& o) override {
    return collectives_.AllreduceCoalesced(t, o);
  }
  WorkPtr reduce(TensorList& t, const c10d::ReduceOptions& o) override {
    return collectives_.Reduce(t, o);
  }
  WorkPtr allgather(TensorLists& out, TensorList& in, const c10d::AllgatherOptions& o) override {
    return collectives_.Allgather(out, in, o);
  }
  WorkPtr allgather_coalesced(TensorLists& out, TensorList& in,
                              const c10d::AllgatherOptions& o) override {
    return collectives_.AllgatherCoalesced(out, in, o);
  }
  WorkPtr _allgather_base(at::Tensor& out, at::Tensor& in,
                          const c10d::AllgatherOptions& o) override {
    return collectives_.AllgatherBase(out, in, o);
  }
  WorkPtr gather(TensorLists& out, TensorList& in, const c10d::GatherOptions& o) override {
    return collectives_.Gather(out, in, o);
  }
  WorkPtr scatter(TensorList& out, TensorLists& in, const c10d::ScatterOptions& o) override {
    return collectives_.Scatter(out, in, o);
  }
  WorkPtr reduce_scatter(TensorList& out, TensorLists& in,
                         const c10d::ReduceScatterOptions& o) override {
    return collectives_.ReduceScatter(out, in, o);
  }
  WorkPtr _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                               const c10d::ReduceScatterOptions& o) override {
    return collectives_.ReduceScatterBase(out, in, o);
  }
  WorkPtr alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                        std::vector<int64_t>& in_splits,
                        const c10d::AllToAllOptions& o) override {
    return collectives_.AlltoallBase(out, in, out_splits, in_splits, o);
  }
  WorkPtr alltoall(TensorList& out, TensorList& in, const c10d::AllToAllOptions& o) override {
    return collectives_.Alltoall(out, in, o);
  }
  WorkPtr barrier(const c10d::BarrierOptions& o) override { return collectives_.Barrier(o); }
  WorkPtr send(TensorList& t, int dst, int tag) override { return collectives_.Send(t, dst, tag); }
  WorkPtr recv(TensorList& t, int src, int tag) override { return collectives_.Recv(t, src, tag); }
  WorkPtr recvAnysource(TensorList&, int) override {
    TORCH_CHECK(false, "syncline: recv from any source (recvAnysource) is not supported; "
                       "pass src= to recv");
  }
  // Every rank numbers its collectives from 1, so there is nothing to agree on.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return collectives_.next_seq() - 1; }

  // For benchmarks only (collectives.h).
  double TimeOps(const std::string& op, const at::Tensor& buffer, const at::Tensor& output,
                 int64_t iters) {
    return collectives_.TimeOps(op, buffer, output, iters);
  }

 private:
  Collectives collectives_;
};

}  // namespace

void BindProcessGroup(pybind11::module_& module) {
  namespace py = pybind11;
  py::class_<ProcessGroupSyncline, c10d::ProcessGroup,
             c10::intrusive_ptr<ProcessGroupSyncline>>(module, "ProcessGroupSyncline",
      "A c10d ProcessGroup over a syncline::Communicator.")
      .def("_time_ops", &ProcessGroupSyncline::TimeOps, py::arg("op"), py::arg("buffer"),
           py::arg("output"), py::arg("iters"), py::call_guard<py::gil_scoped_release>(),
           "For benchmarks: the seconds `iters` ops take straight over Syncline's C++ "
           "API on this group's communicator, each waited for (allreduce sum in place on "
           "`buffer`, allgather of `buffer` into `output`, broadcast of `buffer` from "
           "rank 0). bench/compare/python_split.py's `cpp` variant.");
  module.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout) {
        return c10::make_intrusive<ProcessGroupSyncline>(store, rank, size, timeout);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>(),
      "Creates the syncline process group: the creator function that "
      "torch.distributed.Backend.register_backend takes. Blocks until every "
      "rank has joined or `timeout`.");
}

}  // namespace syncline::torch_backend
