// agreement.h: small collectives that keep every rank's decisions equal.
//
// Checkpoint save and load, and a trainer's startup checks, make decisions
// from local facts (is the folder writable? which checkpoint verifies? is
// the dataset there?). If ranks decided differently, the job would diverge
// or hang in its next collective. These helpers exchange each rank's verdict
// so that every rank returns the same answer and the same one-line error,
// naming the rank it came from.
//
// Buffers are staged on the communicator's device (a CUDA communicator such
// as NCCL cannot read host memory), so the implementation uses ATen tensors;
// this header does not.
//
// Example (every rank exits with the same one-line reason):
//   absl::Status ok = AgreeOnStatus(comm.get(), LoadDataset(path), {});
//   if (!ok.ok()) {
//     std::fprintf(stderr, "%s\n", ok.ToString().c_str());
//     return 1;
//   }
//
// Threading: call from the thread that posts the communicator's ops.
// Collective: every rank must call the same helpers in the same order. A null
// communicator means a single process: the helpers return the local value.
#ifndef SYNCLINE_DDP_AGREEMENT_H_
#define SYNCLINE_DDP_AGREEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "syncline/communicator.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::ddp {

// AllgatherBytes()
//
// Every rank's `local` string, indexed by rank (lengths may differ).
absl::StatusOr<std::vector<std::string>> AllgatherBytes(Communicator* comm,
                                                        const std::string& local,
                                                        absl::Duration timeout);

// AllgatherInt64()
//
// Every rank's `local` value, indexed by rank.
absl::StatusOr<std::vector<int64_t>> AllgatherInt64(Communicator* comm, int64_t local,
                                                    absl::Duration timeout);

// AgreeOnStatus()
//
// OK on every rank when `local` is OK on every rank. Otherwise every rank
// returns the error of the lowest failing rank, with the same code and its
// message prefixed by "rank <r>: " (when there is more than one rank). Also
// a barrier: no rank returns before all have called it. If the exchange
// itself fails (a dead peer), that error is returned, with `local`'s message
// attached if `local` was an error too.
absl::Status AgreeOnStatus(Communicator* comm, const absl::Status& local,
                           absl::Duration timeout);

}  // namespace syncline::ddp

#pragma GCC visibility pop

#endif  // SYNCLINE_DDP_AGREEMENT_H_
