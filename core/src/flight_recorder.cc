// flight_recorder.cc: the per-communicator op ring, its dumps and the
// cross-rank desync report.
#include "flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "syncline/communicator.h"
#include "syncline/env.h"
#include "syncline/log.h"
#include "syncline/rendezvous.h"
#include "rank_ranges.h"

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

// The recorder's timestamps ("ticks"): every op takes two on its path, at
// posting and at completion. On x86-64 a TSC read (rdtsc) took 12 ns on an
// AMD EPYC VM where clock_gettime took 32 ns through the vDSO (absl::Now()
// 60 ns on an earlier VM), and the two reads were about an eighth of a
// 1-rank 8-byte broadcast over the mpi backend (perf). So where the kernel
// keeps its own time by the TSC (clocksource "tsc": it found it invariant
// and in step across CPUs), a tick is a TSC value; elsewhere it is
// CLOCK_MONOTONIC in ns. Ticks become wall time only when read (WallMapper).
struct TickBase {
  bool tsc = false;
  int64_t tick = 0;     // the first tick of the process...
  int64_t mono_ns = 0;  // ...and CLOCK_MONOTONIC then
};

int64_t MonotonicNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

bool KernelTimesByTsc() {
#if defined(__x86_64__)
  FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f == nullptr) return false;
  char name[32] = {};
  const bool read = std::fgets(name, sizeof(name), f) != nullptr;
  std::fclose(f);
  return read && std::strcmp(name, "tsc\n") == 0;
#else
  return false;
#endif
}

int64_t RawTick(bool tsc) {
#if defined(__x86_64__)
  if (tsc) return static_cast<int64_t>(__rdtsc());
#endif
  (void)tsc;
  return MonotonicNs();
}

const TickBase& Base() {
  static const TickBase base = [] {
    TickBase b;
    b.tsc = KernelTimesByTsc();
    b.tick = RawTick(b.tsc);
    b.mono_ns = MonotonicNs();
    return b;
  }();
  return base;
}

int64_t Tick() { return RawTick(Base().tsc); }

// Ticks to wall time, as of its construction: the tick rate from two
// (tick, CLOCK_MONOTONIC) pairs, the process's first and this one, and the
// wall clock read now, so that an NTP step moves every time alike. With TSC
// ticks the pairs are at least 10 ms apart (it waits for that once, if the
// process is younger): their reads' jitter then errs by under 1e-5.
class WallMapper {
 public:
  WallMapper() {
    const TickBase& base = Base();
    if (base.tsc) {
      const int64_t young_ns = 10000000 - (MonotonicNs() - base.mono_ns);
      if (young_ns > 0) absl::SleepFor(absl::Nanoseconds(young_ns));
    }
    tick_ = Tick();
    const int64_t mono_ns = MonotonicNs();
    timespec wall;
    ::clock_gettime(CLOCK_REALTIME, &wall);
    wall_ = absl::TimeFromTimespec(wall);
    ns_per_tick_ = base.tsc ? static_cast<double>(mono_ns - base.mono_ns) /
                                  static_cast<double>(tick_ - base.tick)
                            : 1.0;
  }

  int64_t UnixMicros(int64_t tick) const {
    const double ago_ns = static_cast<double>(tick_ - tick) * ns_per_tick_;
    return absl::ToUnixMicros(wall_ - absl::Nanoseconds(static_cast<int64_t>(ago_ns)));
  }

 private:
  int64_t tick_;
  absl::Time wall_;
  double ns_per_tick_;
};

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
          (void)r->Dump();  // logs where it went
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
                               std::shared_ptr<Store> store, const std::string& backend)
    : rank_(rank), size_(size), comm_id_(comm_id),
      where_(absl::StrFormat(" on rank %d/%d over %s", rank, size, backend)),
      store_(std::move(store)),
      capacity_(Capacity()) {
  (void)Base();  // the clock's first read (a file read) not on an op's path
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

void FlightRecorder::Posted(const OpLabel& what, size_t bytes) {
  const uint64_t seq = what.seq;
  const int64_t now = Tick();  // outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  // Once the ring is full, the oldest entry is overwritten field by field:
  // its error string keeps its buffer, and no Entry is built and moved.
  if (ring_.size() < capacity_) ring_.emplace_back();
  Entry& e = ring_[next_];
  e.seq = seq;
  e.what = what;
  e.bytes = bytes;
  e.state = State::kPosted;
  e.posted = now;
  e.finished = kNotFinished;
  e.error.clear();
  next_ = next_ + 1 == capacity_ ? 0 : next_ + 1;
  if (!(seq & Communicator::kP2pSeqBit)) last_posted_ = std::max(last_posted_, seq);
}

void FlightRecorder::Finished(uint64_t seq, bool ok, absl::string_view error) {
  const int64_t now = Tick();  // outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  // Newest first: an op usually finishes soon after it was posted, so this
  // finds it in a step or two instead of scanning the whole ring on every
  // op (measured: the full scan of 1024 entries was a sixth of an 8-byte
  // allreduce). Sequence numbers are unique within the ring.
  const size_t n = ring_.size();
  for (size_t back = 1; back <= n; ++back) {
    Entry& e = ring_[next_ >= back ? next_ - back : next_ + capacity_ - back];
    if (e.seq == seq && e.state == State::kPosted) {
      e.state = ok ? State::kCompleted : State::kFailed;
      e.finished = now;
      if (!error.empty()) e.error.assign(error.data(), error.size());  // Posted cleared it
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
  const WallMapper wall;  // may wait (under 10 ms, once): outside the lock
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
        i ? "," : "", e.seq, JsonEscape(e.what.ToString()), e.bytes, StateName(e.state),
        wall.UnixMicros(e.posted),
        e.finished == kNotFinished ? 0 : wall.UnixMicros(e.finished),
        JsonEscape(e.error));
  }
  out += "]}\n";
  return out;
}

namespace {

// mkdir -p: creates `dir` and its missing parents.
bool MakeDirs(const std::string& dir, int* error) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string part = dir.substr(0, i);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      *error = errno;
      return false;
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = ENOTDIR;
    return false;
  }
  return true;
}

// The job's part of a dump's name: its id where one is known, else this
// process, so that two jobs never write the same file.
std::string JobTag() {
  const std::string id = ResolveJobId().id;
  if (id.empty()) return absl::StrCat("pid", ::getpid());
  std::string tag;
  for (char c : id) tag += absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ? c : '_';
  return tag;
}

// What a rank publishes: "<posted> <completed> <unix us>\n<op>". `op` is the
// op the rank is in (as the context string reads, without " on rank ...").
struct Progress {
  uint64_t posted = 0, completed = 0;
  int64_t at_us = 0;
  std::string op;
};

std::string Encode(const Progress& p) {
  return absl::StrCat(p.posted, " ", p.completed, " ", p.at_us, "\n", p.op);
}

bool Decode(const std::string& value, Progress* p) {
  std::pair<std::string, std::string> lines = absl::StrSplit(value, absl::MaxSplits('\n', 1));
  std::vector<std::string> f = absl::StrSplit(lines.first, ' ');
  if (f.size() != 3) return false;
  p->op = lines.second;
  return absl::SimpleAtoi(f[0], &p->posted) && absl::SimpleAtoi(f[1], &p->completed) &&
         absl::SimpleAtoi(f[2], &p->at_us);
}

}  // namespace

std::string FlightRecorder::Dump() const {
  std::string dir = EnvString("SYNCLINE_DEBUG_DIR");
  if (dir.empty()) dir = "/tmp";
  int error = 0;
  if (!MakeDirs(dir, &error)) {
    SL_LOG(WARN, "flight recorder of rank %d (communicator %d) not written: cannot create "
                 "SYNCLINE_DEBUG_DIR=%s: %s", rank_, comm_id_, dir, std::strerror(error));
    return "";
  }
  std::string path = absl::StrCat(dir, "/syncline-flight-", JobTag(), "-rank", rank_,
                                  "-comm", comm_id_, ".json");
  std::string json = ToJson();
  FILE* f = std::fopen(path.c_str(), "w");
  bool ok = f != nullptr && std::fwrite(json.data(), 1, json.size(), f) == json.size();
  error = errno;
  if (f != nullptr && std::fclose(f) != 0 && ok) ok = false, error = errno;
  if (!ok) {
    SL_LOG(WARN, "flight recorder of rank %d (communicator %d) not written to %s: %s",
           rank_, comm_id_, path, std::strerror(error));
    return "";
  }
  SL_LOG(WARN, "flight recorder of rank %d (communicator %d) written to %s", rank_, comm_id_,
         path);
  return path;
}

std::string FlightRecorder::ProgressValue(uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  Progress p{last_posted_, last_completed_, absl::ToUnixMicros(absl::Now()), ""};
  // The op asked about, else the oldest collective still running.
  const Entry* in = nullptr;
  for (const Entry& e : ring_) {
    if (e.seq & Communicator::kP2pSeqBit) continue;
    if (seq != 0 && e.seq == seq) { in = &e; break; }
    if (e.state == State::kPosted && (in == nullptr || e.seq < in->seq)) in = &e;
  }
  if (in != nullptr) p.op = in->what.WithoutWhere();
  return Encode(p);
}

void FlightRecorder::Publish() {
  uint64_t posted, completed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted = last_posted_;
    completed = last_completed_;
  }
  // Nothing before the first op: "never published" then means just that.
  if (posted == published_posted_ && completed == published_completed_) return;
  if (store_->Set(absl::StrCat("progress/", rank_), ProgressValue(0)).ok()) {
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
    cv_.wait_for(lock, kPublishPeriod, [this] { return stop_; });
  }
}

std::string FlightRecorder::DesyncReport(uint64_t seq, absl::Duration wait,
                                         bool only_if_another_answered) {
  if (!store_ || size_ <= 1) return "";
  const absl::Time start = absl::Now();
  // Answer first, then wait for the others' answers: ranks stuck in this op
  // time out at about the same time and answer within moments of each other.
  const std::string mine = ProgressValue(seq);
  (void)store_->Set(absl::StrCat("progress/", rank_), mine);
  (void)store_->Set(absl::StrCat("answer/", seq, "/", rank_), mine);
  std::vector<std::string> answer_keys, progress_keys;
  for (int r = 0; r < size_; ++r) {
    answer_keys.push_back(absl::StrCat("answer/", seq, "/", r));
    progress_keys.push_back(absl::StrCat("progress/", r));
  }
  if (only_if_another_answered) {
    // A peer error: only ranks last seen inside this op may still answer
    // (they are timing out in it too); a dead rank never will.
    std::vector<std::string> awaited;
    auto seen = store_->Check(progress_keys);
    for (int r = 0; seen.ok() && r < size_; ++r) {
      if (r == rank_ || !(*seen)[r]) continue;
      auto value = store_->Get(progress_keys[r], absl::Seconds(1));
      Progress p;
      if (value.ok() && Decode(*value, &p) && p.posted >= seq && p.completed < seq) {
        awaited.push_back(answer_keys[r]);
      }
    }
    if (!awaited.empty()) (void)store_->Wait(awaited, wait);
  } else {
    (void)store_->Wait(answer_keys, wait);  // returns as soon as all are there
  }
  auto answered = store_->Check(answer_keys);
  if (only_if_another_answered) {
    int others = 0;
    for (int r = 0; answered.ok() && r < size_; ++r) others += r != rank_ && (*answered)[r];
    if (others == 0) return "";
  }
  auto published = store_->Check(progress_keys);
  const int64_t now_us = absl::ToUnixMicros(absl::Now());

  std::vector<int> never_joined, finished_but_not_next, stuck, silent, unreadable, quiet;
  std::vector<std::string> details;
  std::vector<std::pair<std::string, int>> ops_at_seq;  // (op, rank) inside #seq
  for (int r = 0; r < size_; ++r) {
    const bool answer = answered.ok() && (*answered)[r];
    const bool progress = published.ok() && (*published)[r];
    if (!answer) quiet.push_back(r);
    if (!answer && !progress) {
      if (published.ok()) {
        silent.push_back(r);
      } else {
        unreadable.push_back(r);
        details.push_back(absl::StrFormat("rank %d's progress could not be read: %s", r,
                                          published.status().message()));
      }
      continue;
    }
    auto value = store_->Get(answer ? answer_keys[r] : progress_keys[r], absl::Seconds(1));
    Progress p;
    if (!value.ok() || !Decode(*value, &p)) {
      unreadable.push_back(r);
      details.push_back(absl::StrFormat(
          "rank %d's progress could not be read: %s", r,
          value.ok() ? "malformed value" : std::string(value.status().message())));
      continue;
    }
    const std::string in = p.op.empty() ? "" : absl::StrCat(", in ", p.op);
    if (answer) {
      details.push_back(absl::StrFormat("rank %d: last posted #%d, last completed #%d%s", r,
                                        p.posted, p.completed, in));
    } else {
      details.push_back(absl::StrFormat(
          "rank %d did not answer (stopped or hung?); its last published progress was #%d "
          "(posted #%d, completed #%d, %.1f s before this report%s)",
          r, p.completed, p.posted, p.completed, (now_us - p.at_us) / 1e6, in));
    }
    if (p.posted < seq) {
      never_joined.push_back(r);
    } else if (p.completed >= seq && p.posted == seq) {
      finished_but_not_next.push_back(r);
    } else if (p.completed < seq) {
      stuck.push_back(r);
      if (!p.op.empty()) ops_at_seq.emplace_back(p.op, r);
    }
  }
  std::string report = absl::StrFormat("desync report for op #%d:", seq);
  if (!never_joined.empty())
    absl::StrAppend(&report, " ", FormatRanks(never_joined), " never joined op #", seq, ";");
  if (!finished_but_not_next.empty())
    absl::StrAppend(&report, " ", FormatRanks(finished_but_not_next), " finished #", seq,
                    " but never started #", seq + 1, ";");
  if (!stuck.empty())
    absl::StrAppend(&report, " ", FormatRanks(stuck), stuck.size() == 1 ? " is" : " are",
                    " inside op #", seq, ";");
  // Different ops at one sequence number: a desync the check plugin would
  // have caught at once. Say what each group of ranks is in.
  std::map<std::string, std::vector<int>> by_op;
  for (const auto& [op, r] : ops_at_seq) by_op[op].push_back(r);
  if (by_op.size() > 1) {
    std::vector<std::string> groups;
    for (const auto& [op, ranks] : by_op) {
      groups.push_back(absl::StrCat(FormatRanks(ranks), ranks.size() == 1 ? " is" : " are",
                                    " in ", op));
    }
    absl::StrAppend(&report, " ranks disagree on op #", seq, ": ", absl::StrJoin(groups, "; "),
                    ";");
  }
  if (!silent.empty())
    absl::StrAppend(&report, " ", FormatRanks(silent),
                    " never published progress (no op posted yet, or not started);");
  if (!unreadable.empty())
    absl::StrAppend(&report, " ", FormatRanks(unreadable), " could not be read;");
  if (quiet.empty()) {
    absl::StrAppend(&report, " every rank answered");
  } else {
    absl::StrAppendFormat(&report, " %s did not answer within %s", FormatRanks(quiet),
                          absl::FormatDuration(wait));
  }
  absl::StrAppendFormat(&report, " (collected in %.3f s; %s)",
                        absl::ToDoubleSeconds(absl::Now() - start),
                        absl::StrJoin(details, "; "));
  return report;
}

}  // namespace syncline::internal
