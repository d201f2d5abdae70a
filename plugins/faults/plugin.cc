// plugin.cc: the faults interposer, deterministic fault injection.
//
// libsyncline-plugin-faults.so reads SYNCLINE_FAULT (syntax in
// fault_spec.h) when each communicator is created and, on the ranks and ops
// it names, delays a post, kills the process, closes the connections or
// fails the creation. Tests use it to provoke failures on purpose; users can
// use it to rehearse how a job behaves when a rank stalls or dies. Every
// injected fault is announced on stderr first, so that a log shows it was
// deliberate.
//
// Threading: faults fire inside Post(), which the core calls from one thread
// at a time per communicator; a delay blocks that thread (and so the
// caller), exactly as a slow rank would.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "plugins/faults/fault_spec.h"
#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/interposer.h"
#include "syncline/plugin_sdk/op_format.h"

namespace syncline::plugin::faults {
namespace {

using backend::SlSetError;

void Announce(int rank, const std::string& what) {
  std::fprintf(stderr, "syncline faults: rank %d: %s (SYNCLINE_FAULT)\n", rank,
               what.c_str());
  std::fflush(stderr);
}

// FaultsComm: applies this rank's faults to the ops it posts.
class FaultsComm : public WrappedComm {
 public:
  FaultsComm(const sl_backend_t* next, sl_comm_t* inner,
             const sl_comm_config_t& config, std::vector<Fault> faults)
      : WrappedComm(next, inner, config), faults_(std::move(faults)) {}

  sl_result_t Post(const sl_op_t& op, std::unique_ptr<WrappedRequest>* request,
                   sl_error_t* err) override {
    // Faults apply in the order written, so "delay then kill" works.
    for (const Fault& f : faults_) {
      if (f.op != op.seq) continue;
      const std::string what = backend::SlDescribeOp(op);
      switch (f.kind) {
        case FaultKind::kDelay:
          Announce(rank(), "delaying " + what + " by " + std::to_string(f.ms) + " ms");
          std::this_thread::sleep_for(std::chrono::milliseconds(f.ms));
          break;
        case FaultKind::kKill:
          Announce(rank(), "killing this process (SIGKILL) at " + what);
          ::kill(::getpid(), SIGKILL);
          break;
        case FaultKind::kClose: {
          Announce(rank(), "closing this rank's connections at " + what);
          sl_error_t ignored{};
          next()->comm_abort(inner(), &ignored);
          return SlSetError(err, SL_ERR_ABORTED,
                            "fault injected by SYNCLINE_FAULT (%s): rank %d closed its "
                            "connections before op #%llu",
                            f.text.c_str(), rank(),
                            static_cast<unsigned long long>(op.seq));
        }
        case FaultKind::kFailInit:
          break;
      }
    }
    return PostInner(op, request, err);
  }

 private:
  const std::vector<Fault> faults_;  // only those that apply to this comm
};

// The faults of SYNCLINE_FAULT that apply to `config`'s rank and comm id;
// fails (as an injected init failure) when one of them is fail_init.
sl_result_t FaultsFor(const sl_comm_config_t& config, std::vector<Fault>* mine,
                      sl_error_t* err) {
  const char* env = std::getenv("SYNCLINE_FAULT");
  std::vector<Fault> all;
  std::string error;
  if (!ParseFaults(env != nullptr ? env : "", &all, &error)) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "%s", error.c_str());
  }
  for (const Fault& f : all) {
    if (!Applies(f, config.rank, config.comm_id)) continue;
    if (f.kind == FaultKind::kFailInit) {
      Announce(config.rank, "failing communicator creation");
      return SlSetError(
          err, SL_ERR_UNAVAILABLE,
          "fault injected by SYNCLINE_FAULT (%s): communicator %llu fails to "
          "initialize on rank %d",
          f.text.c_str(), static_cast<unsigned long long>(config.comm_id), config.rank);
    }
    mine->push_back(f);
  }
  return SL_OK;
}

sl_result_t CreateComm(const sl_backend_t* next, const sl_comm_config_t& config,
                       std::unique_ptr<WrappedComm>* comm, sl_error_t* err) {
  std::vector<Fault> mine;
  sl_result_t rc = FaultsFor(config, &mine, err);
  if (rc != SL_OK) return rc;
  sl_comm_t* inner = nullptr;
  rc = CreateInner(next, config, &inner, err);
  if (rc != SL_OK) return rc;
  *comm = std::make_unique<FaultsComm>(next, inner, config, std::move(mine));
  return SL_OK;
}

// A split child: the same faults apply to it by its own rank and comm id
// (fail_init fails the split; the caller destroys the inner child).
sl_result_t WrapChild(const sl_backend_t* next, sl_comm_t* inner,
                      const sl_comm_config_t& config, std::unique_ptr<WrappedComm>* comm,
                      sl_error_t* err) {
  std::vector<Fault> mine;
  const sl_result_t rc = FaultsFor(config, &mine, err);
  if (rc != SL_OK) return rc;
  *comm = std::make_unique<FaultsComm>(next, inner, config, std::move(mine));
  return SL_OK;
}

const InterposerInfo kInfo = {"faults", CreateComm, WrapChild};

}  // namespace
}  // namespace syncline::plugin::faults

extern "C" SL_PLUGIN_EXPORT const sl_interposer_t* SL_INTERPOSER_ENTRY(void) {
  return syncline::plugin::PublishInterposer<syncline::plugin::faults::kInfo>();
}
