// torch_store.h: PyTorch's c10d::Store as a syncline::Store.
//
// init_process_group hands the backend PyTorch's own store (TCPStore from
// env:// or tcp://, FileStore from file://, each under a PrefixStore per
// group). Syncline's rendezvous runs over it unchanged, so torchrun jobs need
// nothing else. c10d's exceptions become Status: a timeout is
// DeadlineExceeded naming the keys, anything else Unavailable.
//
// Thread safety: as the wrapped store (c10d's stores may be used from any
// thread).
#ifndef SYNCLINE_PYTHON_TORCH_STORE_H_
#define SYNCLINE_PYTHON_TORCH_STORE_H_

#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "syncline/store.h"

namespace syncline::torch_backend {

std::shared_ptr<Store> MakeTorchStore(c10::intrusive_ptr<c10d::Store> store);

}  // namespace syncline::torch_backend

#endif  // SYNCLINE_PYTHON_TORCH_STORE_H_
