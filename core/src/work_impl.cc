// work_impl.cc: Work over a plugin request.
#include "work_impl.h"

#include "absl/strings/str_cat.h"
#include "store_adapter.h"
#include "syncline/plugin_sdk/block_cache.h"

namespace syncline::internal {
namespace {

std::string DestroyedBeforeFinishing(const std::string& context, const char* detail) {
  return absl::StrCat(context,
                      " failed: the communicator was destroyed before this work finished; "
                      "wait for every Work before destroying its Communicator (",
                      detail, ")");
}

using WorkBlocks = backend::BlockCache<sizeof(PluginWork)>;

}  // namespace

// Only PluginWork itself comes here (the class is final): the size is its own.
void* PluginWork::operator new(size_t) { return WorkBlocks::Allocate(); }

void PluginWork::operator delete(void* block, size_t) noexcept { WorkBlocks::Free(block); }

PluginWork::PluginWork(std::shared_ptr<BackendComm> backend, sl_request_t* request,
                       const OpLabel& label)
    : backend_(std::move(backend)), table_(backend_->table()), request_(request),
      slot_(backend_->Track(request_)), seq_(label.seq), label_(label),
      recorder_(backend_->recorder()) {}

PluginWork::~PluginWork() {
  backend_->Untrack(slot_);
  table_->request_free(request_);
  // backend_ goes after the request: the last holder destroys the communicator.
}

absl::Status PluginWork::Finish(sl_result_t result, const sl_error_t& err) {
  done_ = true;
  if (result == SL_OK) {
    final_ = absl::OkStatus();
  } else {
    std::string message = absl::StrCat(Describe(), " failed: ", err.message);
    // Destroying a Communicator aborts its running ops (backend_comm.h).
    const bool destroyed = result == SL_ERR_ABORTED && backend_->closed_with_running_ops();
    if (destroyed) message = DestroyedBeforeFinishing(Describe(), err.message);
    const bool fatal = result != SL_ERR_INVALID_ARGUMENT && result != SL_ERR_UNSUPPORTED &&
                       !destroyed;
    if (fatal && recorder_) {
      if (result == SL_ERR_TIMEOUT || result == SL_ERR_PEER) {
        // Say who is where. On a timeout, peers stuck in this op time out
        // within moments of this rank and answer at once; the bound only
        // matters for ranks that cannot answer. A peer error comes from a
        // peer that died or gave up first (its deadline may have started
        // earlier, or a loaded machine ran it sooner): this rank answers at
        // once, so that peer's report is complete, and reports only when a
        // peer answers too (it timed out in this op; only peers last seen
        // inside it are waited for); a peer that simply died needs none.
        std::string report =
            recorder_->DesyncReport(seq_, absl::Seconds(1), result == SL_ERR_PEER);
        if (!report.empty()) absl::StrAppend(&message, "\n  ", report);
      }
      // A timeout, a dead peer, an abort or a desync: keep a record.
      std::string path = recorder_->Dump();
      if (!path.empty()) absl::StrAppend(&message, "\n  flight recorder: ", path);
    }
    final_ = absl::Status(ToStatusCode(result), message);
  }
  if (recorder_) recorder_->Finished(seq_, final_.ok(), final_.message());
  return final_;
}

absl::Status PluginWork::Wait(absl::Duration timeout) {
  if (done_) return final_;
  int64_t ms = timeout == absl::InfiniteDuration()
                   ? -1
                   : std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout));
  sl_error_t err;
  ClearForCall(err);
  sl_result_t r = table_->request_wait(request_, ms, &err);
  if (r == SL_ERR_TIMEOUT && ms >= 0) {
    // Either this wait ran out or the op itself timed out: ask which.
    int done = 0;
    sl_error_t test_err;
    ClearForCall(test_err);
    sl_result_t tr = table_->request_test(request_, &done, &test_err);
    if (!done) {
      return absl::DeadlineExceededError(absl::StrCat(
          Describe(), " is still running after waiting ", absl::FormatDuration(timeout)));
    }
    return Finish(tr, test_err);
  }
  return Finish(r, err);
}

absl::Status PluginWork::WaitStream(void* stream) {
  if (done_) return final_;
  if (table_->request_stream_wait == nullptr) return Wait(absl::InfiniteDuration());
  sl_error_t err;
  ClearForCall(err);
  const sl_result_t r = table_->request_stream_wait(request_, stream, &err);
  if (r == SL_OK) return absl::OkStatus();  // queued, or the op already succeeded
  // The op ended with this error, or the stream could not wait: ask which.
  int done = 0;
  sl_error_t test_err;
  ClearForCall(test_err);
  const sl_result_t tr = table_->request_test(request_, &done, &test_err);
  if (done) return Finish(tr, test_err);
  return absl::Status(ToStatusCode(r),
                      absl::StrCat(Describe(), ": could not make the stream wait for it: ",
                                   err.message));
}

bool PluginWork::Test() {
  if (done_) return true;
  int done = 0;
  sl_error_t err;
  ClearForCall(err);
  sl_result_t r = table_->request_test(request_, &done, &err);
  if (done) (void)Finish(r, err);
  return done_;
}

absl::Status PluginWork::status() {
  if (!Test()) return StillRunningError(Describe());
  return final_;
}

namespace {
class CompletedWork final : public Work {
 public:
  CompletedWork(uint64_t seq, std::string context, absl::Status status)
      : seq_(seq), context_(std::move(context)), status_(std::move(status)) {}
  absl::Status Wait(absl::Duration) override { return status_; }
  bool Test() override { return true; }
  absl::Status status() override { return status_; }
  uint64_t seq() const override { return seq_; }
  std::string Describe() const override { return context_; }

 private:
  uint64_t seq_;
  std::string context_;
  absl::Status status_;
};
}  // namespace

std::unique_ptr<Work> MakeCompletedWork(uint64_t seq, std::string context,
                                        absl::Status status) {
  return std::make_unique<CompletedWork>(seq, std::move(context), std::move(status));
}

}  // namespace syncline::internal
