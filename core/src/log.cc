// log.cc: rank-aware logging on spdlog.
//
// One process-wide logger. SetLogRank() rebuilds its pattern and sinks; it is
// called by Communicator::Create and may be called again by the user.
#include "syncline/log.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "syncline/env.h"

namespace syncline {
namespace {

struct LogState {
  std::mutex mu;
  std::shared_ptr<spdlog::logger> logger;
  std::atomic<int> level{static_cast<int>(LogLevel::kInfo)};
  std::atomic<bool> rank_selected{true};  // below-warn lines allowed here
  std::set<std::string> warned;
};

LogState& State() {
  static LogState* state = new LogState();  // never destroyed: used at exit
  return *state;
}

LogLevel ParseLevel(const std::string& name) {
  if (name == "trace") return LogLevel::kTrace;
  if (name == "debug") return LogLevel::kDebug;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  return LogLevel::kInfo;
}

bool RankSelected(const std::string& spec, int rank) {
  if (spec == "all") return true;
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    int r = -1;
    if (absl::SimpleAtoi(part, &r) && r == rank) return true;
  }
  return false;
}

spdlog::level::level_enum ToSpd(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

void Configure(LogState& s, int rank, int world_size) {
  auto console = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  std::vector<spdlog::sink_ptr> sinks{console};
  std::string dir = EnvString("SYNCLINE_LOG_DIR");
  if (!dir.empty() && rank >= 0) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(
          absl::StrCat(dir, "/rank-", rank, ".log")));
    } catch (const spdlog::spdlog_ex& e) {
      std::fprintf(stderr, "syncline: SYNCLINE_LOG_DIR=%s unusable: %s\n",
                   dir.c_str(), e.what());
    }
  }
  s.logger = std::make_shared<spdlog::logger>("syncline", sinks.begin(),
                                              sinks.end());
  std::string tag = rank >= 0 ? absl::StrCat("[rank ", rank, "/", world_size, "]")
                              : std::string("[rank ?]");
  s.logger->set_pattern(absl::StrCat("%H:%M:%S.%e %^%L%$ ", tag, " %v"));
  s.logger->set_level(spdlog::level::trace);
  s.logger->flush_on(spdlog::level::trace);
  s.level = static_cast<int>(ParseLevel(EnvString("SYNCLINE_LOG_LEVEL")));
  s.rank_selected = rank < 0 || RankSelected(EnvString("SYNCLINE_LOG_RANKS"), rank);
}

std::shared_ptr<spdlog::logger> Logger() {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.logger) Configure(s, -1, 0);
  return s.logger;
}

}  // namespace

void SetLogRank(int rank, int world_size) {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  Configure(s, rank, world_size);
}

bool LogEnabled(LogLevel level) {
  LogState& s = State();
  if (static_cast<int>(level) < s.level.load()) return false;
  return level >= LogLevel::kWarn || s.rank_selected.load();
}

void LogMessage(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  Logger()->log(ToSpd(level), "{}", std::string(message));
}

void LogWarnOnce(absl::string_view key, absl::string_view message) {
  LogState& s = State();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.warned.insert(std::string(key)).second) return;
  }
  LogMessage(LogLevel::kWarn, message);
}

}  // namespace syncline
