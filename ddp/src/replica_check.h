// replica_check.h: verifies that every rank wraps the same model (private to
// libsyncline_ddp).
#ifndef SYNCLINE_DDP_SRC_REPLICA_CHECK_H_
#define SYNCLINE_DDP_SRC_REPLICA_CHECK_H_

#include <ATen/Tensor.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "syncline/communicator.h"

namespace syncline::ddp::internal {

// VerifyReplicas()
//
// Collective. Allgathers each rank's parameter count, dtypes, shapes and
// requires_grad flags, and throws Error on every rank if any
// rank differs from rank 0, naming the first differing parameter (index and
// this rank's name for it), what each differing rank has there, and the list
// of differing ranks.
void VerifyReplicas(Communicator& comm, const std::vector<at::Tensor>& params,
                    const std::vector<std::string>& names, absl::Duration timeout);

}  // namespace syncline::ddp::internal

#endif  // SYNCLINE_DDP_SRC_REPLICA_CHECK_H_
