// backend_catalog.h: the one list of the backends Syncline ships.
//
// What the core says about backends by name comes from here: the backends
// syncline-doctor and ProbeBackends() report even when their plugin is
// missing, the choice SYNCLINE_BACKEND=auto makes per device, and the
// backends a message suggests for a device. A plugin found on the search
// path but not listed here (one built outside the tree) is reported too
// (loader.h's AvailableBackends) and can be named in SYNCLINE_BACKEND; the
// list only holds what Syncline itself knows to recommend. Adding a backend
// to the tree is one line in backend_catalog.cc.
//
// Thread safety: constant data; call from any thread.
#ifndef SYNCLINE_CORE_SRC_BACKEND_CATALOG_H_
#define SYNCLINE_CORE_SRC_BACKEND_CATALOG_H_

#include <string>
#include <vector>

namespace syncline::internal {

// KnownBackends()
//
// "gloo", "ucx", "nccl": every backend of the tree, in the order messages
// list them.
const std::vector<std::string>& KnownBackends();

// DefaultBackend()
//
// What SYNCLINE_BACKEND=auto picks for buffers on CUDA (`cuda`) or the CPU.
const char* DefaultBackend(bool cuda);

// BackendsFor()
//
// The known backends that move buffers of that kind, for hints: "gloo or
// ucx", "nccl".
std::string BackendsFor(bool cuda);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_BACKEND_CATALOG_H_
