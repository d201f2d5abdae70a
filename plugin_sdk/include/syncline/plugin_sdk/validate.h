// validate.h: the one check of an sl_op_t against the ABI, for every backend.
//
// A backend's post() refuses a malformed op at once with a message, before
// it reaches the transport: an unknown kind, counts that do not fit the op
// (the buffer table in plugin_abi.h), a root or peer out of range, an invalid
// dtype or reduce op, a null buffer with elements, a buffer on a device the
// backend does not move, send and recv of different dtypes. The core checks
// the same before posting; this is the plugin's own guard, so that every
// backend says the same thing in the same words, and a new backend gets it
// for one call. What is particular to a transport (NCCL's alltoall cannot run
// in place) is checked by the backend after this.
//
// Every message starts with the op and its sequence number, "allreduce #17"
// or "send p2p#3" (SlOpName), and the result is SL_ERR_UNSUPPORTED for a
// device the backend lacks, SL_ERR_INVALID_ARGUMENT otherwise.
//
// Thread safety: stateless; call from any thread.
//
// Example:
//   const SlOpRules kRules = {"gloo", SL_DEVICE_CPU, -1,
//                             "use SYNCLINE_BACKEND=nccl or cpu:gloo,cuda:nccl"};
//   std::string why;
//   if (sl_result_t rc = SlValidateOp(op, rank, size, kRules, &why); rc != SL_OK)
//     return SlSetError(err, rc, "gloo %s", why.c_str());
#ifndef SYNCLINE_PLUGIN_SDK_VALIDATE_H_
#define SYNCLINE_PLUGIN_SDK_VALIDATE_H_

#include <cstdint>
#include <string>

#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/op_format.h"

namespace syncline::backend {

// SlOpRules
//
// What a backend accepts beyond the ABI's own rules.
struct SlOpRules {
  const char* backend;        // "gloo", named in the device message
  sl_device_type_t device;    // the one device type whose buffers it moves
  int32_t device_index = -1;  // >= 0: buffers must be on this device
  const char* device_hint = "";  // what to do instead, e.g. "use SYNCLINE_BACKEND=nccl"
};

// SlOpName (op_format.h) heads every message.

// SlValidateOp()
//
// SL_OK, or an error code with `*message` saying what is wrong and naming
// the op. `rank` and `size` are the communicator's.
sl_result_t SlValidateOp(const sl_op_t& op, int rank, int size, const SlOpRules& rules,
                         std::string* message);

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_VALIDATE_H_
