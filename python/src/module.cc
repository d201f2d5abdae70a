// module.cc: the syncline_torch._C extension module.
//
// Importing it (syncline_torch/__init__.py does) first imports
// torch.distributed, whose pybind11 classes (Store, ProcessGroup) this
// module's classes and functions refer to.
#include <pybind11/pybind11.h>

#include "process_group.h"

PYBIND11_MODULE(_C, module) {
  pybind11::module_::import("torch.distributed");
  module.doc() = "Syncline's PyTorch c10d backend (import syncline_torch to register it)";
  syncline::torch_backend::BindProcessGroup(module);
}
