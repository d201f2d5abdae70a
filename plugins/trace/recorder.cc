// recorder.cc: see recorder.h.
#include "plugins/trace/recorder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "syncline/plugin_sdk/op_format.h"

namespace syncline::plugin::trace {
namespace {

// Send/recv sequence numbers carry this bit (plugin_abi.h).
constexpr uint64_t kP2pSeqBit = SL_SEQ_P2P_BIT;
constexpr uint64_t kSeqMask = ~kP2pSeqBit;


std::string JsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

// The estimated start of each event (see recorder.h), by index.
std::vector<int64_t> EstimateStarts(const std::vector<TraceEvent>& events) {
  std::vector<int64_t> started(events.size());
  std::map<uint64_t, std::vector<size_t>> collectives;  // comm -> indices
  for (size_t i = 0; i < events.size(); ++i) {
    started[i] = events[i].queued_us;
    if (IsCollective(events[i].kind)) collectives[events[i].comm_id].push_back(i);
  }
  for (auto& [comm, idx] : collectives) {
    std::sort(idx.begin(), idx.end(),
              [&](size_t a, size_t b) { return events[a].seq < events[b].seq; });
    int64_t prev_finished = 0;
    for (size_t i : idx) {
      const TraceEvent& e = events[i];
      started[i] = std::max(e.queued_us, prev_finished);
      if (e.finished_us >= 0) {
        started[i] = std::min(started[i], e.finished_us);
        prev_finished = e.finished_us;
      }
    }
  }
  return started;
}

struct OpTotals {
  uint64_t count = 0;
  uint64_t bytes = 0;
  int64_t micros = 0;
  double bus_bytes = 0;  // bytes * busbw factor, summed
};

}  // namespace

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FormatChromeTrace(const std::vector<TraceEvent>& events, int rank,
                              int world_size) {
  const std::vector<int64_t> started = EstimateStarts(events);
  std::string out =
      "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"syncline trace\","
      "\"rank\":" +
      std::to_string(rank) + ",\"world_size\":" + std::to_string(world_size) +
      "},\"traceEvents\":[\n";
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":"
                "\"rank %d\"}}",
                rank, rank);
  out += buf;
  std::map<uint64_t, bool> named;  // comms whose track has a name
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    if (!named[e.comm_id]) {
      named[e.comm_id] = true;
      std::snprintf(
          buf, sizeof(buf),
          ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64
          ",\"args\":{\"name\":\"comm %" PRIu64 " (rank %d/%d)\"}}",
          rank, e.comm_id, e.comm_id, e.comm_rank, e.comm_size);
      out += buf;
    }
    const std::string what = backend::SlDescribeOp(e.kind, e.seq, e.dtype, e.count, e.redop,
                                                   e.root, e.peer, e.tag);
    const char* status = e.finished_us < 0   ? "unobserved"
                         : e.result == SL_OK ? "ok"
                                             : "error";
    std::snprintf(buf, sizeof(buf),
                  "\"args\":{\"seq\":%" PRIu64 ",\"op\":\"%s\",\"bytes\":%" PRIu64
                  ",\"comm\":%" PRIu64 ",\"queued_us\":%" PRId64
                  ",\"started_us\":%" PRId64 ",\"finished_us\":%" PRId64
                  ",\"status\":\"%s\"",
                  e.seq & kSeqMask, JsonEscape(what).c_str(), e.bytes, e.comm_id,
                  e.queued_us, started[i], e.finished_us, status);
    std::string args = buf;
    if (e.seq & kP2pSeqBit) args += ",\"p2p\":true";
    if (e.result != SL_OK) args += ",\"error\":\"" + JsonEscape(e.error) + "\"";
    args += "}";
    // Send/recv have their own numbering (the core sets kP2pSeqBit on it).
    const std::string name = backend::SlOpName(e.kind, e.seq);
    // The running span: a complete event on the communicator's track, where
    // collectives never overlap. Send/recv can overlap anything, so they
    // and the time spent queued are async spans, which may overlap.
    const int64_t end = e.finished_us >= 0 ? e.finished_us : started[i];
    if (IsCollective(e.kind)) {
      std::snprintf(buf, sizeof(buf),
                    ",\n{\"name\":\"%s\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":%d,"
                    "\"tid\":%" PRIu64 ",\"ts\":%" PRId64 ",\"dur\":%" PRId64 ",",
                    name.c_str(), rank, e.comm_id, started[i], end - started[i]);
      out += buf + args + "}";
    } else {
      for (const char* ph : {"b", "e"}) {
        std::snprintf(
            buf, sizeof(buf),
            ",\n{\"name\":\"%s\",\"cat\":\"p2p\",\"ph\":\"%s\",\"id\":\"%" PRIu64
            ".%" PRIu64 "\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":%" PRId64 ",",
            name.c_str(), ph, e.comm_id, e.seq, rank, e.comm_id,
            *ph == 'b' ? e.queued_us : end);
        out += buf + args + "}";
      }
    }
    if (started[i] > e.queued_us) {
      for (const char* ph : {"b", "e"}) {
        std::snprintf(buf, sizeof(buf),
                      ",\n{\"name\":\"%s "
                      "queued\",\"cat\":\"queue\",\"ph\":\"%s\",\"id\":\"q%" PRIu64
                      ".%" PRIu64 "\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":%" PRId64 "}",
                      name.c_str(), ph, e.comm_id, e.seq, rank, e.comm_id,
                      *ph == 'b' ? e.queued_us : started[i]);
        out += buf;
      }
    }
  }
  return out + "\n]}\n";
}

Recorder& Recorder::Get() {
  static Recorder* recorder = [] {
    Recorder* r = new Recorder();  // never destroyed; see recorder.h
    std::atexit([] { Recorder::Get().FlushAtExit(); });
    return r;
  }();
  return *recorder;
}

void Recorder::CommCreated(int rank, int size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank_ < 0) {
    rank_ = rank;
    world_size_ = size;
  }
  ++live_comms_;
}

void Recorder::CommDestroyed() {
  std::lock_guard<std::mutex> lock(mu_);
  --live_comms_;
  WriteLocked();
  if (live_comms_ == 0 && summarized_ < events_.size()) PrintSummaryLocked();
}

void Recorder::Record(TraceEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

void Recorder::FlushAtExit() {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank_ < 0) return;  // no traced communicator in this process
  if (written_ < events_.size() || written_ == 0) WriteLocked();
  if (summarized_ < events_.size()) PrintSummaryLocked();
}

std::string Recorder::Path() {
  std::lock_guard<std::mutex> lock(mu_);
  return PathLocked();
}

std::string Recorder::PathLocked() const {
  const char* dir = std::getenv("SYNCLINE_TRACE_DIR");
  const std::string folder = dir != nullptr && *dir != '\0' ? dir : ".";
  return folder + "/trace-rank" + std::to_string(rank_ < 0 ? 0 : rank_) + ".json";
}

void Recorder::WriteLocked() {
  const std::string path = PathLocked();
  const std::string folder = path.substr(0, path.rfind('/'));
  ::mkdir(folder.c_str(), 0755);  // one level, if missing; errors surface below
  // Write a temporary file and rename it, so a reader never sees half a file.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const std::string doc = FormatChromeTrace(events_, rank_, world_size_);
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr && std::fwrite(doc.data(), 1, doc.size(), f) == doc.size();
  if (f != nullptr) ok = std::fclose(f) == 0 && ok;
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    std::fprintf(stderr,
                 "syncline trace: rank %d: cannot write %s; set SYNCLINE_TRACE_DIR to a "
                 "writable folder\n",
                 rank_, path.c_str());
    std::remove(tmp.c_str());
  }
  written_ = events_.size();
}

void Recorder::PrintSummaryLocked() {
  const std::vector<int64_t> started = EstimateStarts(events_);
  std::map<int, OpTotals> totals;
  for (size_t i = 0; i < events_.size(); ++i) {
    const TraceEvent& e = events_[i];
    if (e.result != SL_OK || e.finished_us < 0) continue;
    OpTotals& t = totals[e.kind];
    ++t.count;
    t.bytes += e.bytes;
    t.micros += e.finished_us - started[i];
    t.bus_bytes += static_cast<double>(e.bytes) * BusBandwidthFactor(e.kind, e.comm_size);
  }
  std::string out = "syncline trace: rank " + std::to_string(rank_) + "/" +
                    std::to_string(world_size_) + " summary (timeline in " +
                    PathLocked() + ")\n";
  char line[256];
  std::snprintf(line, sizeof(line), "  %-15s %8s %16s %12s %12s %12s\n", "op", "count",
                "bytes", "time (ms)", "algbw GB/s", "busbw GB/s");
  out += line;
  for (const auto& [kind, t] : totals) {
    const double seconds = static_cast<double>(t.micros) * 1e-6;
    const double algbw = seconds > 0 ? static_cast<double>(t.bytes) / seconds / 1e9 : 0;
    const double busbw = seconds > 0 ? t.bus_bytes / seconds / 1e9 : 0;
    std::snprintf(line, sizeof(line),
                  "  %-15s %8" PRIu64 " %16" PRIu64 " %12.3f %12.3f %12.3f\n",
                  OpKindName(kind), t.count, t.bytes, seconds * 1e3, algbw, busbw);
    out += line;
  }
  const size_t failed =
      std::count_if(events_.begin(), events_.end(),
                    [](const TraceEvent& e) { return e.result != SL_OK; });
  if (failed > 0) out += "  (" + std::to_string(failed) + " failed ops not counted)\n";
  if (dropped_ > 0) {
    out += "  (" + std::to_string(dropped_) +
           " later ops not recorded: the trace keeps the first " +
           std::to_string(kMaxEvents) + ")\n";
  }
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
  summarized_ = events_.size();
}

}  // namespace syncline::plugin::trace
