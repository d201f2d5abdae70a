// communicator_impl.h: the private state behind Communicator.
#ifndef SYNCLINE_CORE_SRC_COMMUNICATOR_IMPL_H_
#define SYNCLINE_CORE_SRC_COMMUNICATOR_IMPL_H_

#include <memory>
#include <mutex>
#include <string>

#include "backend_comm.h"
#include "flight_recorder.h"
#include "syncline/communicator.h"
#include "syncline/plugin_abi.h"

namespace syncline {

struct Communicator::Impl {
  const sl_backend_t* table = nullptr;  // possibly wrapped by interposers
  // The plugin communicator and its store, shared with every Work posted on
  // it: the last of them destroys it (backend_comm.h).
  std::shared_ptr<internal::BackendComm> backend;
  std::string name;
  uint64_t comm_id = 0;
  std::shared_ptr<Store> root_store;  // unscoped: sub-groups scope it anew
  std::string backend_options;
  std::string backend_options_variable;  // SYNCLINE_<BACKEND>_OPTIONS
  int splits = 0;      // Split() calls so far (same on every rank)
  std::mutex post_mu;  // serializes posting so seq order == post order
  // Shared with every Work, which reports completion and timeouts to it.
  std::shared_ptr<internal::FlightRecorder> recorder;
};

namespace internal {
// Builds impl.backend over `plugin_store` with impl.table (used by Create
// and Split); the store lives as long as the plugin communicator.
absl::Status CreateBackendComm(Communicator::Impl& impl, int rank, int size,
                               std::shared_ptr<Store> plugin_store, Device device,
                               absl::Duration timeout);
// Builds child.backend with the table's comm_split, collectively over
// `parent` (every rank of it calls this, color < 0 included; child.backend
// stays null then). Posting on the parent is blocked meanwhile, since the
// backend may run ops on it. Keeps `plugin_store` (null when color < 0)
// alive like CreateBackendComm. Requires parent.table->comm_split.
absl::Status SplitBackendComm(Communicator::Impl& parent, Communicator::Impl& child,
                              int color, int key, std::shared_ptr<Store> plugin_store);
}  // namespace internal

}  // namespace syncline

#endif  // SYNCLINE_CORE_SRC_COMMUNICATOR_IMPL_H_
