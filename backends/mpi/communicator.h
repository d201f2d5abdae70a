// communicator.h: a Syncline communicator over an MPI communicator.
//
// Create() joins MPI_COMM_WORLD's ranks: MPI's world rank and size must be
// the ones Syncline's rendezvous gave (config.rank, config.size), every rank
// checks in through config.store (so a rank that never comes is named), and
// the world is duplicated twice (MPI_Comm_idup, bounded by
// config.timeout_ms), so each Syncline communicator has MPI traffic of its
// own, and its own algorithms (the small allreduce, the allgather, the
// reduce_scatter and the broadcast, work.h) a communicator apart.
// config.options may set allreduce_small_max=BYTES,
// allgather_small_max=BYTES, reduce_scatter_own_max=BYTES and
// broadcast_own_max=BYTES. Split() is
// MPI_Comm_split after a bounded MPI_Ibarrier over the parent (the child
// duplicated once more, and inheriting the options). Post() starts the op
// with MPI's non-blocking call, or the own algorithm's first step, and
// returns at once.
//
// MPI advances ops only inside MPI calls. A thread in request_wait drives
// them; while none is, the communicator's progress thread tests the oldest
// pending ops (every 20 us while there are some, every 1 ms otherwise), so
// that ops posted and not waited on still run, and their deadlines fire.
// The destructor stops and joins it.
//
// Thread safety: as plugin_abi.h: Post and Split from one thread at a time;
// Abort from any thread.
#ifndef SYNCLINE_BACKENDS_MPI_COMMUNICATOR_H_
#define SYNCLINE_BACKENDS_MPI_COMMUNICATOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "work.h"
#include "syncline/plugin_abi.h"

namespace syncline::mpi_backend {

// The progress thread (Communicator::Progress) drives the ops nobody waits
// on: every 20 us while there are some. With none (no op, or a thread in
// request_wait driving MPI itself) it sleeps kProgressIdleMin, then twice as
// long each time it finds none again, up to kProgressIdleMax: an op posted
// after a quiet spell and not waited on is picked up within that much.
// Waking every 1 ms instead cost 6-9 % of a 1-4 MiB allgather here (README.md,
// "The progress thread's wake-ups").
// It drives only ops it already found unfinished at an earlier wake-up
// (Request::SeenByProgress), and backs off while it finds only new ones: an
// op caught between its post and its wait (the usual case in a loop of
// post-then-wait) is left to its waiter, instead of a wake-up taking a core
// from the ranks for it (about once a millisecond in such loops: README.md,
// "The progress thread's wake-ups"). An op nobody waits on is driven within
// twice kProgressIdleMax.
inline constexpr std::chrono::milliseconds kProgressIdleMin{1};
inline constexpr std::chrono::milliseconds kProgressIdleMax{16};

class Communicator {
 public:
  static sl_result_t Create(const sl_comm_config_t& config, std::unique_ptr<Communicator>* out,
                            sl_error_t* err);
  ~Communicator();

  sl_result_t Post(const sl_op_t& op, std::shared_ptr<Request>* request, sl_error_t* err);
  sl_result_t Split(int32_t color, int32_t key, const sl_store_t* store, uint64_t id,
                    std::unique_ptr<Communicator>* child, sl_error_t* err);
  void Abort();

 private:
  Communicator(std::shared_ptr<CommState> state, int64_t timeout_ms);
  // Starts `op` in MPI; MPI's return code.
  int Start(Request& request, MPI_Request* started);
  // The progress thread's loop.
  void Progress();

  const std::shared_ptr<CommState> state_;
  const int64_t timeout_ms_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  std::thread progress_;
};

}  // namespace syncline::mpi_backend

#endif  // SYNCLINE_BACKENDS_MPI_COMMUNICATOR_H_
