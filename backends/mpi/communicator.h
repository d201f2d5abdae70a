// communicator.h: a Syncline communicator over an MPI communicator.
//
// Create() joins MPI_COMM_WORLD's ranks: MPI's world rank and size must be
// the ones Syncline's rendezvous gave (config.rank, config.size), every rank
// checks in through config.store (so a rank that never comes is named), and
// the world is duplicated (MPI_Comm_idup, bounded by config.timeout_ms), so
// each Syncline communicator has MPI traffic of its own. Split() is
// MPI_Comm_split after a bounded MPI_Ibarrier over the parent. Post() starts
// the op with MPI's non-blocking call and returns at once.
//
// Thread safety: as plugin_abi.h: Post and Split from one thread at a time;
// Abort from any thread.
#ifndef SYNCLINE_BACKENDS_MPI_COMMUNICATOR_H_
#define SYNCLINE_BACKENDS_MPI_COMMUNICATOR_H_

#include <cstdint>
#include <memory>

#include "work.h"
#include "syncline/plugin_abi.h"

namespace syncline::mpi_backend {

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

  const std::shared_ptr<CommState> state_;
  const int64_t timeout_ms_;
};

}  // namespace syncline::mpi_backend

#endif  // SYNCLINE_BACKENDS_MPI_COMMUNICATOR_H_
