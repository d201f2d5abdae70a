// process_group.h: the torch-version glue of the syncline c10d backend.
//
// PyTorch 1.13 puts the collective API on c10d::ProcessGroup; 2.x moved it
// onto c10d::Backend. process_group.cc is the one file that knows which: it
// subclasses the right class, forwards every op to Collectives, and binds
// the class and its creator function into the Python module. A port to
// another torch version touches only that file.
#ifndef SYNCLINE_PYTHON_PROCESS_GROUP_H_
#define SYNCLINE_PYTHON_PROCESS_GROUP_H_

#include <pybind11/pybind11.h>

namespace syncline::torch_backend {

// Adds ProcessGroupSyncline and create_process_group(store, rank, size,
// timeout), the creator that torch.distributed.Backend.register_backend
// takes, to `module`.
void BindProcessGroup(pybind11::module_& module);

}  // namespace syncline::torch_backend

#endif  // SYNCLINE_PYTHON_PROCESS_GROUP_H_
