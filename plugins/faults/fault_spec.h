// fault_spec.h: the SYNCLINE_FAULT syntax of the faults interposer.
//
// SYNCLINE_FAULT is a ';'-separated list of faults, each `kind:key=value,...`:
//
//   delay:rank=R,op=N,ms=M   sleep M ms before posting op #N on rank R
//   kill:rank=R,op=N         SIGKILL rank R's process when it posts op #N
//   close:rank=R,op=N        abort rank R's inner communicator at op #N,
//                            closing its connections: op #N fails there with
//                            SL_ERR_ABORTED and the peers see a peer failure
//   fail_init:rank=R         creating a communicator fails on rank R
//
// `op` is the sequence number that the core gives each op, from 1 (the
// "#N" in every error message). `rank` is the rank within the communicator,
// or `*` for every rank. Every fault also accepts `comm=ID` to limit it to
// the communicator with that id (the core's comm_id: 1 for the first
// communicator a process creates, 2 for the next; splits get derived ids).
// Example:
//
//   SYNCLINE_FAULT="delay:rank=1,op=5,ms=2000;kill:rank=2,op=7;fail_init:rank=3"
//
// Thread safety: stateless; call from any thread.
#ifndef SYNCLINE_PLUGINS_FAULTS_FAULT_SPEC_H_
#define SYNCLINE_PLUGINS_FAULTS_FAULT_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace syncline::plugin::faults {

enum class FaultKind { kDelay, kKill, kClose, kFailInit };

struct Fault {
  FaultKind kind = FaultKind::kDelay;
  int rank = -1;      // -1: every rank
  uint64_t op = 0;    // sequence number; unused by fail_init
  int64_t ms = 0;     // delay only
  int64_t comm = -1;  // -1: every communicator
  // -1: every generation; else only when SYNCLINE_RESTART_COUNT equals it
  // (so a fault can fire once and let syncline-run's restart succeed).
  int64_t restart = -1;
  std::string text;   // the entry as written, for messages
};

// ParseFaults()
//
// Parses `spec` (may be empty). On a syntax error returns false and sets
// `error` to a message that quotes the bad entry and shows the syntax.
bool ParseFaults(const std::string& spec, std::vector<Fault>* faults, std::string* error);

// True if `fault` applies to this rank of communicator `comm_id`.
bool Applies(const Fault& fault, int rank, uint64_t comm_id);

}  // namespace syncline::plugin::faults

#endif  // SYNCLINE_PLUGINS_FAULTS_FAULT_SPEC_H_
