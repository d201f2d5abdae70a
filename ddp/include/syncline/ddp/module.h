// module.h: DdpModule, DistributedDataParallel as a torch::nn module.
//
// What a user of PyTorch's `DistributedDataParallel(model)` expects: one
// object that is the model. It is a torch::nn::ModuleHolder (like the
// holders TORCH_MODULE defines), so `ddp->forward(x)` or `ddp(x)` runs the
// wrapped module's forward after DistributedDataParallel::PrepareForward(),
// and `ddp->parameters()` are the wrapped module's own tensors, ready for an
// optimizer. The wrapped module is registered as the submodule "module", as
// PyTorch's DDP does: named_parameters() reads "module.fc1.weight", printing
// shows the model under "(module)", and train()/eval(), zero_grad() and
// is_training() reach it. NoSync(), Join() and RegisterCommHook() are
// DistributedDataParallel's (distributed.h states their contracts).
//
// Move the model to its device before wrapping it, as with PyTorch's DDP: the
// gradient buckets are allocated at construction. forward() is a template
// (it takes whatever the wrapped forward takes, default arguments included),
// so a DdpModule cannot sit inside torch::nn::Sequential or AnyModule; wrap
// the Sequential instead. The holder owns its
// DistributedDataParallel; the wrapped module is shared with the holder `M`
// it was given. Threading, errors and the collective calls are those of
// DistributedDataParallel: construct it and call forward on every rank, from
// the training thread.
//
// Example (run under `syncline-run -n 4 ./train`):
//   Net net;  // TORCH_MODULE(Net)
//   syncline::ddp::DdpModule<Net> model(net, comm);
//   torch::optim::SGD opt(model->parameters(), 0.1);
//   for (auto& [x, y] : my_shard) {
//     opt.zero_grad();
//     torch::cross_entropy_loss(model(x), y).backward();  // averaged here
//     opt.step();
//   }
#ifndef SYNCLINE_DDP_MODULE_H_
#define SYNCLINE_DDP_MODULE_H_

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <ostream>
#include <utility>

#include "syncline/communicator.h"
#include "syncline/ddp/comm_hooks.h"
#include "syncline/ddp/distributed.h"

namespace syncline::ddp {

// DdpModuleImpl
//
// The module behind DdpModule<M>; `M` is the wrapped module's holder (a
// TORCH_MODULE type such as `Net`, or torch::nn::Linear). Construction is
// DistributedDataParallel's: collective, and it broadcasts rank 0's
// parameters and buffers into the wrapped module.
template <typename M>
class DdpModuleImpl : public torch::nn::Module {
 public:
  DdpModuleImpl(M module, std::shared_ptr<syncline::Communicator> comm,
                DdpOptions options = {})
      : torch::nn::Module("syncline::ddp::DdpModule"),
        module_(register_module("module", std::move(module))),
        ddp_(std::make_unique<DistributedDataParallel>(module_.ptr(), std::move(comm),
                                                       std::move(options))) {}

  // forward()
  //
  // PrepareForward(), then the wrapped module's forward(args...), whatever
  // its signature. With grad mode off (evaluation) it communicates nothing.
  template <typename... Args>
  auto forward(Args&&... args) {
    ddp_->PrepareForward();
    return module_->forward(std::forward<Args>(args)...);
  }

  // See DistributedDataParallel::NoSync(), Join() and RegisterCommHook().
  [[nodiscard]] DistributedDataParallel::NoSyncGuard NoSync() { return ddp_->NoSync(); }
  [[nodiscard]] DistributedDataParallel::JoinGuard Join(JoinOptions options = {}) {
    return ddp_->Join(std::move(options));
  }
  void RegisterCommHook(CommHook hook) { ddp_->RegisterCommHook(std::move(hook)); }

  // The wrapped module (PyTorch's `ddp.module`), e.g. to save its state
  // without the "module." prefix.
  M& module() { return module_; }
  // The wrapper itself: buckets(), options(), communicator(), ...
  DistributedDataParallel& ddp() { return *ddp_; }

  // "syncline::ddp::DdpModule(rank=0/4)", then the wrapped module.
  void pretty_print(std::ostream& stream) const override {
    stream << name() << "(rank=" << ddp_->communicator()->rank() << "/"
           << ddp_->communicator()->size() << ")";
  }

 private:
  M module_;
  std::unique_ptr<DistributedDataParallel> ddp_;
};

// DdpModule
//
// The holder: `DdpModule<Net> model(net, comm, options);` then `model(x)`,
// `model->parameters()`, `model->NoSync()`. Copies share one module, as
// every torch::nn holder's do.
template <typename M>
class DdpModule : public torch::nn::ModuleHolder<DdpModuleImpl<M>> {
 public:
  using torch::nn::ModuleHolder<DdpModuleImpl<M>>::ModuleHolder;
  using Impl = DdpModuleImpl<M>;

  // model(args...) is model->forward(args...). ModuleHolder's own operator()
  // deduces forward()'s return type from `&Impl::forward`, which a template
  // forward (any signature, default arguments kept) does not have.
  template <typename... Args>
  auto operator()(Args&&... args) {
    return this->get()->forward(std::forward<Args>(args)...);
  }
};

}  // namespace syncline::ddp

#endif  // SYNCLINE_DDP_MODULE_H_
