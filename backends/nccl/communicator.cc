#include "backends/nccl/communicator.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/nccl/ops.h"
#include "syncline/plugin_sdk/error.h"

namespace syncline::nccl_backend {
namespace {

using backend::SlSetError;

// Bootstrap deadline (and default op deadline) when the core passes none.
constexpr std::chrono::minutes kDefaultTimeout(5);
// Polling interval of an NCCL call that reported ncclInProgress.
constexpr std::chrono::microseconds kEnqueuePoll(50);

// Parses "watchdog_ms=20;abort_poll_ms=100" into `options`.
sl_result_t ParseOptions(const char* text, CommOptions* options, std::string* message) {
  if (text == nullptr) return SL_OK;
  std::string rest = text;
  while (!rest.empty()) {
    const size_t end = rest.find(';');
    const std::string item = rest.substr(0, end);
    rest = end == std::string::npos ? "" : rest.substr(end + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    char* parsed_end = nullptr;
    const long number = std::strtol(value.c_str(), &parsed_end, 10);
    const bool is_number = !value.empty() && *parsed_end == '\0';
    if (key == "watchdog_ms" && is_number && number > 0) {
      options->watchdog_period = std::chrono::milliseconds(number);
      continue;
    }
    if (key == "abort_poll_ms" && is_number && number >= 0) {
      options->abort_poll_period = std::chrono::milliseconds(number);
      continue;
    }
    *message = "bad backend option '" + item +
               "'; the nccl backend knows watchdog_ms=<milliseconds, > 0> and "
               "abort_poll_ms=<milliseconds, 0 = off>";
    return SL_ERR_INVALID_ARGUMENT;
  }
  return SL_OK;
}

// SL_OK when the process can see CUDA device `device`; otherwise why not.
sl_result_t CheckDevice(int device, std::string* message) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // do not leave the error for the host's next call
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    *message =
        std::string("no CUDA device is visible (cudaGetDeviceCount=") +
        (rc != cudaSuccess ? CudaErrorText(rc) : std::string("0")) + ")" +
        (visible != nullptr ? std::string(", CUDA_VISIBLE_DEVICES='") + visible + "'"
                            : std::string()) +
        "; use SYNCLINE_BACKEND=gloo or ucx on CPU";
    return SL_ERR_UNAVAILABLE;
  }
  if (device < 0 || device >= count) {
    *message = "cuda:" + std::to_string(device) + " does not exist; this process sees " +
               std::to_string(count) + " CUDA device(s) (pass Device::Cuda(0.." +
               std::to_string(count - 1) + "), usually LOCAL_RANK)";
    return SL_ERR_INVALID_ARGUMENT;
  }
  return SL_OK;
}

}  // namespace

sl_result_t Communicator::Create(const sl_comm_config_t& config,
                                 std::unique_ptr<Communicator>* comm, sl_error_t* err) {
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                      "nccl comm_create: rank %d is not in a group of %d", config.rank,
                      config.size);
  }
  if (config.device != SL_DEVICE_CUDA) {
    return SlSetError(err, SL_ERR_UNSUPPORTED,
                      "nccl comm_create: the nccl backend moves CUDA buffers only, but "
                      "this communicator is for cpu buffers; use SYNCLINE_BACKEND=gloo "
                      "or ucx on CPU (or a map such as cpu:gloo,cuda:nccl)");
  }
  if (config.store == nullptr) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT,
                      "nccl comm_create: no store to bootstrap with");
  }
  const int device = config.device_index;
  std::string message;
  CommOptions options;
  sl_result_t rc = ParseOptions(config.options, &options, &message);
  if (rc == SL_OK) rc = CheckDevice(device, &message);
  if (rc != SL_OK) {
    PublishBootstrapFailure(config, message);
    return SlSetError(err, rc, "nccl comm_create: %s", message.c_str());
  }
  const auto start = Clock::now();
  const std::chrono::milliseconds timeout =
      config.timeout_ms > 0 ? std::chrono::milliseconds(config.timeout_ms)
                            : std::chrono::milliseconds(kDefaultTimeout);

  ScopedDevice on(device);
  CudaResources cuda_objects;
  cudaError_t cuda = on.status();
  if (cuda == cudaSuccess) cuda = CudaResources::Make(device, &cuda_objects);
  if (cuda != cudaSuccess) {
    message =
        "setting up cuda:" + std::to_string(device) + " failed: " + CudaErrorText(cuda);
    PublishBootstrapFailure(config, message);
    return SlSetError(err, SL_ERR_UNAVAILABLE, "nccl comm_create: %s", message.c_str());
  }
  NcclComm nccl;
  rc = CreateNcclComm(config, device, start + timeout, &nccl, &message);
  if (rc != SL_OK) {
    return SlSetError(err, rc, "nccl comm_create (comm id %" PRIu64 ") on rank %d/%d: %s",
                      config.comm_id, config.rank, config.size, message.c_str());
  }
  comm->reset(new Communicator(config, device, options, std::move(cuda_objects),
                               std::move(nccl)));
  return SL_OK;
}

cudaError_t Communicator::CudaResources::Make(int device, CudaResources* out) {
  out->events = EventPool::Create(device);
  cudaError_t cuda = Stream::Create(&out->stream);
  if (cuda == cudaSuccess) cuda = DeviceBuffer::Allocate(sizeof(float), &out->scratch);
  if (cuda == cudaSuccess) cuda = out->events->Acquire(&out->ready_event);
  return cuda;
}

Communicator::Communicator(const sl_comm_config_t& config, int device,
                           CommOptions options, CudaResources cuda, NcclComm comm)
    : rank_(config.rank),
      size_(config.size),
      device_(device),
      where_("rank " + std::to_string(config.rank) + "/" + std::to_string(config.size) +
             " (cuda:" + std::to_string(device) + ")"),
      default_timeout_(config.timeout_ms > 0
                           ? std::chrono::milliseconds(config.timeout_ms)
                           : kDefaultTimeout),
      options_(options),
      stream_(std::move(cuda.stream)),
      scratch_(std::move(cuda.scratch)),
      events_(std::move(cuda.events)),
      ready_event_(std::move(cuda.ready_event)),
      comm_(std::move(comm)) {
  if (config.size > 1 && options_.abort_poll_period.count() > 0) {
    AbortChannelOptions channel;
    channel.poll_period = options_.abort_poll_period;
    abort_channel_ = std::make_unique<AbortChannel>(config.store, rank_, channel);
  }
  watchdog_ = std::thread([this] { WatchdogLoop(); });
  if (abort_channel_ != nullptr) {
    abort_channel_->Watch([this](const AbortRecord& first) { OnRemoteAbort(first); });
  }
}

Communicator::~Communicator() {
  // First the threads that may touch the store or break the comm: after
  // this, nothing uses the store (its owner frees it once we return).
  if (abort_channel_ != nullptr) abort_channel_->Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();

  // Requests freed while running are still pending: let them finish, each
  // within its own deadline, before the comm goes away under them.
  Clock::time_point drain_until = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& request : pending_) {
      drain_until = std::max(
          drain_until, std::min(request->deadline(), Clock::now() + default_timeout_));
    }
  }
  for (;;) {
    bool drained = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!pending_.empty() && pending_.front()->Poll()) pending_.pop_front();
      drained = pending_.empty();
    }
    if (drained) break;
    if (Clock::now() >= drain_until) {
      Break(BreakReason::Of(
          SL_ERR_ABORTED,
          "the communicator was destroyed while the op was still running past "
          "its deadline"));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> issue(issue_mu_);
  ScopedDevice on(device_);
  (void)comm_.Finalize(Clock::now() + default_timeout_);  // no-op after Break
}

sl_result_t Communicator::Post(const sl_op_t& op, std::shared_ptr<Request>* request,
                               sl_error_t* err) {
  std::string message;
  sl_result_t rc = ValidateOp(op, rank_, size_, device_, &message);
  if (rc != SL_OK) {
    return SlSetError(err, rc, "nccl %s on %s", message.c_str(), where_.c_str());
  }
  Event done;
  const cudaError_t cuda = events_->Acquire(&done);
  if (cuda != cudaSuccess) {
    return SlSetError(err, SL_ERR_INTERNAL, "nccl post on %s: cudaEventCreate failed: %s",
                      where_.c_str(), CudaErrorText(cuda).c_str());
  }
  auto req = std::make_shared<Request>(op, where_, device_, std::move(done));
  auto unusable = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return "nccl " + req->Describe() + " not run on " + where_ +
           ": the communicator is unusable after an earlier failure: " + broken_message_;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ != SL_OK) {
      return SlSetError(err, broken_code_, "%s", unusable().c_str());
    }
  }
  bool broke = false;
  {
    std::lock_guard<std::mutex> issue(issue_mu_);
    rc = IssueLocked(*req, &message, &broke);
  }
  if (rc != SL_OK) {
    if (broke) {
      BreakReason reason = BreakReason::Of(rc, message);
      reason.publish = true;  // NCCL failed under this rank: tell the others
      reason.op = &req->op();
      Break(std::move(reason));
    }
    return SlSetError(err, rc, "%s", message.c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ != SL_OK) {
      // Break() ran between the issue and here and did not see this request.
      req->Complete(broken_code_, unusable());
    } else {
      // With nothing ahead of it on the stream, its turn is now; otherwise
      // the watchdog starts its clock when the op before it has finished.
      if (pending_.empty()) req->clock().Start(Clock::now());
      pending_.push_back(req);
    }
  }
  *request = std::move(req);
  backend::SlClearError(err);
  return SL_OK;
}

sl_result_t Communicator::IssueLocked(Request& request, std::string* message,
                                      bool* broke) {
  const sl_op_t& op = request.op();
  // Built only on failure: the success path is the 5 us overhead budget.
  auto head = [&] { return "nccl " + request.Describe() + " on " + where_; };
  if (!comm_) {
    *message = head() + ": the communicator was aborted";
    return SL_ERR_ABORTED;
  }
  ScopedDevice on(device_);
  cudaError_t cuda = on.status();
  // Order the op after what the caller queued on the buffer's stream. A
  // barrier touches no caller memory, so it need not wait.
  if (cuda == cudaSuccess && op.kind != SL_OP_BARRIER) {
    cudaStream_t caller = static_cast<cudaStream_t>(DataBuffer(op).stream);
    cuda = cudaEventRecord(ready_event_.get(), caller);
    if (cuda == cudaSuccess)
      cuda = cudaStreamWaitEvent(stream_.get(), ready_event_.get(), 0);
  }
  if (cuda != cudaSuccess) {
    (void)cudaGetLastError();
    *message = head() + ": could not order the op after the caller's stream: " +
               CudaErrorText(cuda) +
               " (is the buffer's stream on cuda:" + std::to_string(device_) + "?)";
    return SL_ERR_INVALID_ARGUMENT;
  }
  ncclResult_t nccl =
      EnqueueOp(comm_.get(), op, rank_, size_, stream_.get(), scratch_.get());
  if (nccl == ncclInProgress) {
    nccl = AwaitEnqueueLocked(request.clock().DeadlineIfStartedAt(Clock::now()));
  }
  if (nccl == ncclInProgress) {
    *broke = true;
    *message =
        head() + (breaking_ ? ": the communicator was aborted while NCCL was "
                              "still launching the op"
                            : ": NCCL was still launching the op (connecting to "
                              "peers) at its deadline; a peer is missing or stalled");
    return breaking_ ? SL_ERR_ABORTED : SL_ERR_TIMEOUT;
  }
  if (nccl != ncclSuccess) {
    *broke = true;
    *message = head() + ": NCCL failed to launch it: " + NcclErrorText(nccl, comm_.get());
    return ToSlResult(nccl);
  }
  cuda = cudaEventRecord(request.done_event(), stream_.get());
  if (cuda != cudaSuccess) {
    *broke = true;  // the op is queued but could never be waited for
    *message = head() + ": recording its completion event failed: " + CudaErrorText(cuda);
    return SL_ERR_INTERNAL;
  }
  return SL_OK;
}

ncclResult_t Communicator::AwaitEnqueueLocked(Clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && !breaking_ && Clock::now() < deadline) {
    std::this_thread::sleep_for(kEnqueuePoll);
    if (ncclCommGetAsyncError(comm_.get(), &state) != ncclSuccess)
      state = ncclInternalError;
  }
  return state;
}

void Communicator::Abort() {
  Break(BreakReason::Of(SL_ERR_ABORTED, "the communicator was aborted"));
}

}  // namespace syncline::nccl_backend
