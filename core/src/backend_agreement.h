// backend_agreement.h: every rank of a new communicator agrees on its backend.
//
// Ranks that load different backends (gloo on one, ucx on another), or the
// same backend under different interposers (`check` on one rank only), or
// that cannot load one at all, must all fail, and with the same message:
// which ranks chose what, as ranges. One rank computes that verdict and every
// rank reads it (rank_verdict.h); the rank that hosts the store waits until
// the others have read an error before returning it, so that nobody is left
// with "the store closed the connection".
//
// Cost per rank: about four store requests whatever the world size (plus
// one Get per rank that disagrees with rank 0, for the rank that builds the
// verdict).
#ifndef SYNCLINE_CORE_SRC_BACKEND_AGREEMENT_H_
#define SYNCLINE_CORE_SRC_BACKEND_AGREEMENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "syncline/store.h"

namespace syncline::internal {

// AgreeOnBackend()
//
// `choice` is this rank's backend as a comparable string ("gloo (plugin ABI
// 1, 0.1 +check)"), or why it could not load one. Blocks until every rank
// has reported or `timeout` passes. Returns the same status on every rank:
// OK, FailedPrecondition naming the ranks that disagree or could not load
// their backend, or DeadlineExceeded naming the ranks that never reported.
// `hosts_store`: this process serves the store (see the file comment).
absl::Status AgreeOnBackend(Store& store, int rank, int size,
                            const absl::StatusOr<std::string>& choice,
                            absl::Duration timeout, bool hosts_store);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_BACKEND_AGREEMENT_H_
