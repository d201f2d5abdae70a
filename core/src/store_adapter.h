// store_adapter.h: exposes a C++ Store to plugins as an sl_store_t.
#ifndef SYNCLINE_CORE_SRC_STORE_ADAPTER_H_
#define SYNCLINE_CORE_SRC_STORE_ADAPTER_H_

#include "syncline/plugin_abi.h"
#include "syncline/store.h"

namespace syncline::internal {

// The returned table points at `store`, which must outlive every use of it.
sl_store_t MakeCStore(Store* store);

// absl::Status <-> sl_result_t, one to one as plugin_abi.h lists them; a
// code outside that list maps to SL_ERR_INTERNAL / kInternal.
sl_result_t ToResult(const absl::Status& status);
absl::StatusCode ToStatusCode(sl_result_t result);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_STORE_ADAPTER_H_
