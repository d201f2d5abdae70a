// plugin.cc: the trace interposer's entry point and wrappers.
//
// libsyncline-plugin-trace.so times every op of every communicator it wraps
// and hands the events to the process's Recorder (recorder.h), which writes
// a Chrome trace / Perfetto JSON timeline per rank and prints a per-op
// summary. Merge the ranks' files with tools/syncline-trace-merge.
//
// Threading: TraceComm::Post() runs on the core's posting thread; a
// TraceRequest completes on whichever thread tests or waits it first. Both
// only append to the Recorder, which locks.
#include <memory>
#include <string>

#include "plugins/trace/recorder.h"
#include "syncline/plugin_sdk/interposer.h"
#include "syncline/plugin_sdk/op_format.h"

namespace syncline::plugin::trace {
namespace {

class TraceRequest : public WrappedRequest {
 public:
  TraceRequest(const sl_backend_t* next, sl_request_t* inner, TraceEvent event)
      : WrappedRequest(next, inner), event_(std::move(event)) {}

  ~TraceRequest() override {
    if (completed()) return;
    // Freed without a final wait: record it anyway, finished if it has.
    int done = 0;
    sl_error_t err{};
    Test(&done, &err);
    if (!done) Recorder::Get().Record(event_);  // finished_us stays -1
  }

 protected:
  void OnComplete(sl_result_t result, const char* message) override {
    event_.finished_us = NowMicros();
    event_.result = result;
    event_.error = message;
    Recorder::Get().Record(event_);
  }

 private:
  TraceEvent event_;
};

class TraceComm : public WrappedComm {
 public:
  TraceComm(const sl_backend_t* next, sl_comm_t* inner, const sl_comm_config_t& config)
      : WrappedComm(next, inner, config) {
    Recorder::Get().CommCreated(rank(), size());
  }

  sl_result_t Post(const sl_op_t& op, std::unique_ptr<WrappedRequest>* request,
                   sl_error_t* err) override {
    TraceEvent e;
    e.comm_id = comm_id();
    e.comm_rank = rank();
    e.comm_size = size();
    e.kind = op.kind;
    e.seq = op.seq;
    e.dtype = DataBuffer(op).dtype;
    e.count = OpCount(op);
    e.bytes = OpBytes(op, size());
    e.redop = op.redop;
    e.root = op.root;
    e.peer = op.peer;
    e.tag = op.tag;
    e.queued_us = NowMicros();
    sl_request_t* raw = nullptr;
    const sl_result_t rc = next()->post(inner(), &op, &raw, err);
    if (rc != SL_OK) {  // refused at once: a zero-length span with the error
      e.finished_us = NowMicros();
      e.result = rc;
      e.error = err != nullptr ? err->message : "";
      Recorder::Get().Record(std::move(e));
      return rc;
    }
    *request = std::make_unique<TraceRequest>(next(), raw, std::move(e));
    return SL_OK;
  }

  void OnDestroy() override { Recorder::Get().CommDestroyed(); }
};

const InterposerInfo kInfo = {"trace", CreateAs<TraceComm>, WrapAs<TraceComm>};

}  // namespace
}  // namespace syncline::plugin::trace

extern "C" SL_PLUGIN_EXPORT const sl_interposer_t* SL_INTERPOSER_ENTRY(void) {
  return syncline::plugin::PublishInterposer<syncline::plugin::trace::kInfo>();
}
