#include "backends/nccl/abort_record.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace syncline::nccl_backend {
namespace {

constexpr char kCountKey[] = "nccl/abort/count";
constexpr char kRecordKey[] = "nccl/abort/record";
constexpr char kVersion[] = "v1";

// A first record that exists (the count says so) but cannot be read.
void MarkUnreadable(const std::string& why, AbortRecord* first) {
  *first = AbortRecord();
  first->reason = "its abort record could not be read (" + why + ")";
}

}  // namespace

std::string AbortRecord::Encode() const {
  char head[96];
  std::snprintf(head, sizeof(head), "%s %d %s %" PRIu64 " ", kVersion, rank,
                op.empty() ? "-" : op.c_str(), seq);
  return head + reason;
}

bool AbortRecord::Decode(const std::string& text, AbortRecord* out) {
  // Four space-separated fields, then the reason (which may hold spaces).
  size_t pos = 0;
  std::string fields[4];
  for (std::string& field : fields) {
    const size_t end = text.find(' ', pos);
    if (end == std::string::npos) return false;
    field = text.substr(pos, end - pos);
    pos = end + 1;
  }
  if (fields[0] != kVersion || fields[1].empty() || fields[2].empty() ||
      fields[3].empty()) {
    return false;
  }
  char* end = nullptr;
  const long rank = std::strtol(fields[1].c_str(), &end, 10);
  if (*end != '\0' || rank < -1) return false;
  const unsigned long long seq = std::strtoull(fields[3].c_str(), &end, 10);
  if (*end != '\0') return false;
  out->rank = static_cast<int>(rank);
  out->op = fields[2] == "-" ? "" : fields[2];
  out->seq = seq;
  out->reason = text.substr(pos);
  return true;
}

std::string AbortRecord::Describe() const {
  std::string text = rank >= 0 ? "rank " + std::to_string(rank) + " aborted first"
                               : std::string("a rank aborted first");
  if (!op.empty()) text += ", at " + op + " #" + std::to_string(seq);
  return text + ": " + reason;
}

AbortChannel::AbortChannel(const sl_store_t* store, int rank, AbortChannelOptions options)
    : store_(store), rank_(rank), options_(options) {}

AbortChannel::~AbortChannel() { Stop(); }

bool AbortChannel::Publish(const AbortRecord& record, AbortRecord* first,
                           std::string* error) {
  published_ = true;
  cv_.notify_all();
  int64_t count = 0;
  sl_error_t err{};
  if (store_->add(store_->ctx, kCountKey, 1, &count, &err) != SL_OK) {
    *error = std::string("could not publish the abort in the store: ") + err.message;
    return false;
  }
  if (count > 1) {  // another rank was first: tell its story
    std::string unreadable;
    if (!ReadRecord(first, &unreadable)) MarkUnreadable(unreadable, first);
    return true;
  }
  const std::string text = record.Encode();
  if (store_->set(store_->ctx, kRecordKey, text.data(), text.size(), &err) != SL_OK) {
    *error = std::string("could not write the abort record in the store: ") + err.message;
    return false;
  }
  *first = record;
  return true;
}

bool AbortChannel::Poll(AbortRecord* first, std::string* error) {
  error->clear();
  int64_t count = 0;
  sl_error_t err{};
  if (store_->add(store_->ctx, kCountKey, 0, &count, &err) != SL_OK) {
    *error = std::string("could not read the abort count from the store: ") + err.message;
    return false;
  }
  if (count == 0) return false;
  std::string unreadable;
  // Someone aborted even if its story is unreadable: still report it.
  if (!ReadRecord(first, &unreadable)) MarkUnreadable(unreadable, first);
  return true;
}

bool AbortChannel::ReadRecord(AbortRecord* first, std::string* error) {
  void* value = nullptr;
  size_t len = 0;
  sl_error_t err{};
  if (store_->get(store_->ctx, kRecordKey, options_.record_timeout.count(), &value, &len,
                  &err) != SL_OK) {
    *error = std::string("the first rank to abort did not write its record (it may "
                         "have died while doing so): ") +
             err.message;
    return false;
  }
  const std::string text(static_cast<const char*>(value), len);
  store_->free_value(store_->ctx, value);
  if (!AbortRecord::Decode(text, first)) {
    *error = "the abort record in the store is malformed ('" + text.substr(0, 64) +
             "'); do the ranks run different Syncline builds?";
    return false;
  }
  return true;
}

void AbortChannel::Watch(std::function<void(const AbortRecord&)> on_abort) {
  watcher_ = std::thread([this, on_abort = std::move(on_abort)] { WatchLoop(on_abort); });
}

void AbortChannel::WatchLoop(const std::function<void(const AbortRecord&)>& on_abort) {
  bool reported = false;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, options_.poll_period);
    if (stopping_ || published_) return;
    lock.unlock();
    AbortRecord first;
    std::string error;
    const bool aborted = Poll(&first, &error);
    if (aborted && !published_) {
      on_abort(first);
      return;
    }
    if (!error.empty() && !reported) {
      reported = true;  // once: a store that is gone stays gone
      std::fprintf(stderr,
                   "syncline nccl: rank %d: %s; other ranks' aborts are not seen "
                   "here, ops still fail at their deadlines\n",
                   rank_, error.c_str());
    }
    lock.lock();
  }
}

void AbortChannel::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

}  // namespace syncline::nccl_backend
