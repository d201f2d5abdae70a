// count_interposer.cc: a plugin written outside Syncline's tree, against the
// installed package alone (syncline::plugin_sdk and syncline_add_plugin).
//
// libsyncline-plugin-count.so wraps any backend (SYNCLINE_PLUGINS=count)
// and, when a communicator is destroyed, prints how many ops were posted on
// it: "count interposer: rank 0/2 posted 1 op over gloo". The install test
// loads it from this project's build folder through SYNCLINE_PLUGIN_PATH.
//
// Threading: Post() runs on the core's posting thread (one at a time per
// communicator); OnDestroy() when the communicator is destroyed.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "syncline/plugin_sdk/interposer.h"

namespace {

using syncline::plugin::WrappedComm;
using syncline::plugin::WrappedRequest;

class CountingComm : public WrappedComm {
 public:
  using WrappedComm::WrappedComm;

  sl_result_t Post(const sl_op_t& op, std::unique_ptr<WrappedRequest>* request,
                   sl_error_t* err) override {
    posted_.fetch_add(1, std::memory_order_relaxed);
    return PostInner(op, request, err);
  }

  void OnDestroy() override {
    const uint64_t n = posted_.load(std::memory_order_relaxed);
    std::fprintf(stderr, "count interposer: rank %d/%d posted %llu op%s over %s\n", rank(),
                 size(), static_cast<unsigned long long>(n), n == 1 ? "" : "s",
                 next()->name);
  }

 private:
  std::atomic<uint64_t> posted_{0};
};

// Made by the SDK from (next, inner, config), by comm_create or comm_split.
const syncline::plugin::InterposerInfo kInfo = {"count",
                                                syncline::plugin::CreateAs<CountingComm>,
                                                syncline::plugin::WrapAs<CountingComm>};

}  // namespace

extern "C" SL_PLUGIN_EXPORT const sl_interposer_t* SL_INTERPOSER_ENTRY(void) {
  return syncline::plugin::PublishInterposer<kInfo>();
}
