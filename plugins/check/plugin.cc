// plugin.cc: the check interposer's entry point.
//
// libsyncline-plugin-check.so compares every collective's fingerprint
// across ranks before running it (see check_comm.h). Turned on by
// SYNCLINE_PLUGINS=check or SYNCLINE_DEBUG=detail; SYNCLINE_CHECK_NAN=1 adds
// a NaN/Inf scan of floating-point inputs.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "plugins/check/check_comm.h"
#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/interposer.h"

namespace syncline::plugin::check {
namespace {

CheckOptions OptionsFromEnv() {
  CheckOptions options;
  const char* nan = std::getenv("SYNCLINE_CHECK_NAN");
  options.scan_non_finite = nan != nullptr && std::strcmp(nan, "1") == 0;
  return options;
}

// A communicator the next layer made (by comm_create, or a split child:
// comm_split is only offered over CPU-capable backends, see Wrap()).
sl_result_t WrapComm(const sl_backend_t* next, sl_comm_t* inner,
                     const sl_comm_config_t& config, std::unique_ptr<WrappedComm>* comm,
                     sl_error_t* /*err*/) {
  *comm = std::make_unique<CheckComm>(next, inner, config, OptionsFromEnv());
  return SL_OK;
}

sl_result_t CreateComm(const sl_backend_t* next, const sl_comm_config_t& config,
                       std::unique_ptr<WrappedComm>* comm, sl_error_t* err) {
  // The fingerprints travel in a CPU buffer.
  if ((next->caps->device_mask & (1u << SL_DEVICE_CPU)) == 0) {
    return backend::SlSetError(
        err, SL_ERR_UNSUPPORTED,
        "the check interposer needs a backend that moves CPU buffers, and %s does not; "
        "remove check from SYNCLINE_PLUGINS (and SYNCLINE_DEBUG=detail) for this backend",
        next->name);
  }
  return CreateAndWrap(WrapComm, next, config, comm, err);
}

const InterposerInfo kInfo = {"check", CreateComm, WrapComm};

}  // namespace
}  // namespace syncline::plugin::check

extern "C" SL_PLUGIN_EXPORT const sl_interposer_t* SL_INTERPOSER_ENTRY(void) {
  return syncline::plugin::PublishInterposer<syncline::plugin::check::kInfo>();
}
