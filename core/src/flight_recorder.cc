// flight_recorder.cc: the per-communicator op ring, its dumps and the
// cross-rank desync report.
#include "flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "syncline/communicator.h"
#include "syncline/env.h"
#include "syncline/log.h"

namespace syncline::internal {
namespace {

const char* StateName(FlightRecorder::State s) {
  switch (s) {
    case FlightRecorder::State::kPosted: return "posted";
    case FlightRecorder::State::kCompleted: return "completed";
    case FlightRecorder::State::kFailed: return "failed";
  }
  return "?";
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) absl::StrAppendFormat(&out, "\\u%04x", c);
    else out += c;
  }
  return out;
}

size_t Capacity() {
  auto n = EnvInt("SYNCLINE_FLIGHT_RECORDER_SIZE", /*min_value=*/1);
  if (!n.ok()) {
    LogWarnOnce("SYNCLINE_FLIGHT_RECORDER_SIZE",
                absl::StrCat(n.status().message(), "; keeping the default of 1024 ops"));
  }
  return n.ok() && *n > 0 ? static_cast<size_t>(*n) : 1024;
}

// SIGUSR1: the handler only writes to a pipe; a dump thread does the work.
std::mutex g_registry_mu;
std::set<FlightRecorder*>* g_registry = new std::set<FlightRecorder*>();
int g_signal_pipe[2] = {-1, -1};

void OnSigusr1(int) {
  char c = 1;
  (void)!::write(g_signal_pipe[1], &c, 1);
}

void InstallSignalDumpOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    ::sigaction(SIGUSR1, nullptr, &current);
    if (current.sa_handler != SIG_DFL) return;  // the program has its own
    if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;
    // Process-wide and never joined: it must outlive every communicator and
    // only blocks in read().
    std::thread([] {
      char c;
      while (::read(g_signal_pipe[0], &c, 1) == 1) {
        std::lock_guard<std::mutex> lock(g_registry_mu);
        for (FlightRecorder* r : *g_registry) {
          std::string path = r->Dump();
          SL_LOG(WARN, "SIGUSR1: flight recorder written to %s", path);
        }
      }
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = &OnSigusr1;
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &sa, nullptr);
  });
}

}  // namespace

void RegisterForSignalDump(FlightRecorder* recorder) {
  InstallSignalDumpOnce();
  std::lock_guard<std::mutex> lock(g_registry_mu);
  g_registry->insert(recorder);
}

void UnregisterForSignalDump(FlightRecorder* recorder) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  g_registry->erase(recorder);
}

FlightRecorder::FlightRecorder(int rank, int size, uint64_t comm_id,
                               std::shared_ptr<Store> store)
    : rank_(rank), size_(size), comm_id_(comm_id), store_(std::move(store)),
      capacity_(Capacity()) {
  ring_.reserve(std::min<size_t>(capacity_, 64));
  if (store_ && size_ > 1) publisher_ = std::thread([this] { PublishLoop(); });
  RegisterForSignalDump(this);
}

FlightRecorder::~FlightRecorder() {
  UnregisterForSignalDump(this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (publisher_.joinable()) publisher_.join();
}

void FlightRecorder::Posted(uint64_t seq, const std::string& what, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry e{seq, what, bytes, State::kPosted, absl::Now(), absl::InfinitePast(), ""};
  if (ring_.size() < capacity_) ring_.push_back(std::move(e));
  else ring_[next_] = std::move(e);
  next_ = (next_ + 1) % capacity_;
  if (!(seq & Communicator::kP2pSeqBit)) last_posted_ = std::max(last_posted_, seq);
}

void FlightRecorder::Finished(uint64_t seq, bool ok, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  // Newest first: an op usually finishes soon after it was posted, so this
  // finds it in a step or two instead of scanning the whole ring on every
  // op (measured: the full scan of 1024 entries was a sixth of an 8-byte
  // allreduce). Sequence numbers are unique within the ring.
  const size_t n = ring_.size();
  for (size_t back = 1; back <= n; ++back) {
    Entry& e = ring_[(next_ + capacity_ - back) % capacity_];
    if (e.seq == seq && e.state == State::kPosted) {
      e.state = ok ? State::kCompleted : State::kFailed;
      e.finished = absl::Now();
      e.error = error;
      break;
    }
  }
  if (ok && !(seq & Communicator::kP2pSeqBit)) last_completed_ = std::max(last_completed_, seq);
}

uint64_t FlightRecorder::last_posted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_posted_;
}

uint64_t FlightRecorder::last_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_completed_;
}

std::string FlightRecorder::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Entry*> ordered;
  for (const Entry& e : ring_) ordered.push_back(&e);
  std::sort(ordered.begin(), ordered.end(),
            [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
  std::string out = absl::StrFormat(
      "{\"rank\":%d,\"world_size\":%d,\"comm\":%d,\"last_posted\":%d,"
      "\"last_completed\":%d,\"ops\":[",
      rank_, size_, comm_id_, last_posted_, last_completed_);
  for (size_t i = 0; i < ordered.size(); ++i) {
    const Entry& e = *ordered[i];
    absl::StrAppendFormat(
        &out, "%s\n{\"seq\":%d,\"op\":\"%s\",\"bytes\":%d,\"state\":\"%s\","
              "\"posted_us\":%d,\"finished_us\":%d,\"error\":\"%s\"}",
        i ? "," : "", e.seq, JsonEscape(e.what), e.bytes, StateName(e.state),
        absl::ToUnixMicros(e.posted),
        e.finished == absl::InfinitePast() ? 0 : absl::ToUnixMicros(e.finished),
        JsonEscape(e.error));
  }
  out += "]}\n";
  return out;
}

std::string FlightRecorder::Dump() const {
  std::string dir = EnvString("SYNCLINE_DEBUG_DIR");
  std::string path = absl::StrCat(dir.empty() ? "/tmp" : dir, "/syncline-flight-rank",
                                  rank_, "-comm", comm_id_, ".json");
  std::string json = ToJson();
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return "";
  std::fwrite(json.data(), 1, json.size(), f);
  std::fclose(f);
  return path;
}

void FlightRecorder::Publish() {
  uint64_t posted, completed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted = last_posted_;
    completed = last_completed_;
  }
  if (posted == published_posted_ && completed == published_completed_) return;
  if (store_->Set(absl::StrCat("progress/", rank_), absl::StrCat(posted, " ", completed)).ok()) {
    published_posted_ = posted;
    published_completed_ = completed;
  }
}

void FlightRecorder::PublishLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Publish();
    lock.lock();
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
  }
}

std::string FlightRecorder::DesyncReport(uint64_t seq, absl::Duration wait) {
  if (!store_ || size_ <= 1) return "";
  uint64_t posted, completed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted = last_posted_;
    completed = last_completed_;
  }
  (void)store_->Set(absl::StrCat("progress/", rank_), absl::StrCat(posted, " ", completed));
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(absl::StrCat("progress/", r));
  // Give the others' publishers (1 s period) a chance to catch up.
  absl::SleepFor(wait);
  auto present = store_->Check(keys);
  std::vector<int> never_joined, finished_but_not_next, stuck, silent;
  std::vector<std::string> details;
  for (int r = 0; r < size_; ++r) {
    if (!present.ok() || !(*present)[r]) {
      silent.push_back(r);
      continue;
    }
    auto value = store_->Get(keys[r], absl::Seconds(1));
    std::pair<std::string, std::string> parts =
        absl::StrSplit(value.ok() ? *value : std::string("0 0"), ' ');
    uint64_t p = 0, c = 0;
    (void)absl::SimpleAtoi(parts.first, &p);
    (void)absl::SimpleAtoi(parts.second, &c);
    details.push_back(absl::StrFormat("rank %d: last posted #%d, last completed #%d", r, p, c));
    if (p < seq) never_joined.push_back(r);
    else if (c >= seq && p == seq) finished_but_not_next.push_back(r);
    else if (c < seq) stuck.push_back(r);
  }
  std::string report = absl::StrFormat("desync report for op #%d:", seq);
  if (!never_joined.empty())
    absl::StrAppend(&report, " ranks [", absl::StrJoin(never_joined, ","),
                    "] never joined op #", seq, ";");
  if (!finished_but_not_next.empty())
    absl::StrAppend(&report, " ranks [", absl::StrJoin(finished_but_not_next, ","),
                    "] finished #", seq, " but never started #", seq + 1, ";");
  if (!stuck.empty())
    absl::StrAppend(&report, " ranks [", absl::StrJoin(stuck, ","), "] are inside op #",
                    seq, ";");
  if (!silent.empty())
    absl::StrAppend(&report, " ranks [", absl::StrJoin(silent, ","),
                    "] never reported progress (dead, or not started);");
  absl::StrAppend(&report, " (", absl::StrJoin(details, "; "), ")");
  return report;
}

}  // namespace syncline::internal
