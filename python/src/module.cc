// module.cc: the syncline_torch._C extension module.
//
// Importing it (syncline_torch/__init__.py does) first imports
// torch.distributed, whose pybind11 classes (Store, ProcessGroup) this
// module's classes and functions refer to.
#include <pybind11/pybind11.h>

#include "process_group.h"
#include "work.h"

PYBIND11_MODULE(_C, module) {
  pybind11::module_::import("torch.distributed");
  module.doc() = "Syncline's PyTorch c10d backend (import syncline_torch to register it)";
  syncline::torch_backend::BindProcessGroup(module);
  // Before the interpreter finalizes, the completion threads finish what
  // they hold (work.h, Completer::DrainAll). atexit runs its functions last
  // registered first, so a user's own, registered after this import, still
  // runs before this one, while Completers may be busy.
  pybind11::module_::import("atexit").attr("register")(
      pybind11::cpp_function([] { syncline::torch_backend::Completer::DrainAll(); }));
}
