// options.h: the UCX backend's tuning knobs, set per communicator through
// CommunicatorOptions::backend_options ("key=value;key=value").
//
// They exist so that tests can force either side of every algorithm switch
// point and benchmarks can sweep them. A switch point left unset follows
// the world size (DefaultSmallMax() in algorithms/algorithms.h: the
// crossovers measured for 2-4 ranks, the cost model's beyond; see
// algorithms/select.cc); a set one applies to every world size. Transport
// choice is not here: UCX_TLS, UCX_NET_DEVICES and every other UCX_* variable
// pass straight through to UCX.
//
// Thread safety: a parsed Options is immutable and may be read anywhere.
//
// Example:
//   Options o;
//   std::string error;
//   if (!ParseOptions("allreduce_small_max=0;chunk_bytes=65536", &o, &error)) ...
#ifndef SYNCLINE_BACKENDS_UCX_OPTIONS_H_
#define SYNCLINE_BACKENDS_UCX_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace syncline::ucx_backend {

// How endpoints react to a failed peer; see bootstrap.h.
enum class PeerErrorMode { kAuto, kPeer, kNone };

struct Options {
  // Algorithm switch points, in bytes of one rank's buffer (the allreduce
  // vector, the broadcast/reduce message, one allgather/reduce_scatter
  // block). At or below: the latency algorithm; above: the bandwidth one.
  // Unset: DefaultSmallMax(op, world size, whether the ranks share cores).
  std::optional<size_t> allreduce_small_max;       // recursive doubling | ring
  std::optional<size_t> broadcast_small_max;       // binomial tree | pipelined chain
  std::optional<size_t> reduce_small_max;          // binomial tree | pipelined chain
  std::optional<size_t> allgather_small_max;       // bruck (log2 P rounds) | ring
  std::optional<size_t> reduce_scatter_small_max;  // recursive doubling | ring
  // Segment size of the pipelined (ring, chain) algorithms. Measured
  // (ring allreduce, 2 ranks, shm): 1 MiB segments ran 16-64 MiB at
  // 3.4-4.5 GB/s where 256 KiB segments ran at 0.5-1.3 GB/s, each round
  // paying a rendezvous handshake and, on a loaded machine, a wake-up.
  size_t chunk_bytes = 1 << 20;
  // How long a waiting thread polls the worker before it arms the worker's
  // event fd and sleeps. Measured: at 100 us two ranks fall into a
  // sleep/wake cycle (each wake-up ~200 us on the 2-core VM) and an 8-byte
  // allreduce takes ~214 us; at 1000 us it stays at ~1.7 us.
  int64_t busy_poll_us = 1000;
  // How long a posted op may sit unprogressed (nobody in Wait/Test) before
  // the background progress thread drives it.
  int64_t async_progress_delay_us = 1000;
  PeerErrorMode peer_error_mode = PeerErrorMode::kAuto;
  // Tag spaces a split family may use (tag.h: at most 2048, the width of
  // the tag's space field; at least 2). Past them, Split gives a new group
  // a fresh worker through the store. Lower only to test that fallback.
  int64_t tag_spaces = 2048;
};

// ParseOptions()
//
// Parses "key=value;..." (null or empty: defaults). Unknown keys and bad
// values fail with a message listing the valid keys.
bool ParseOptions(const char* text, Options* options, std::string* error);

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_OPTIONS_H_
