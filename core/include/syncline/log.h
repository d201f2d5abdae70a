// log.h: rank-aware logging.
//
// Every line carries "[rank r/w]". SYNCLINE_LOG_LEVEL sets the level (trace,
// debug, info, warn, error, off; default info). SYNCLINE_LOG_RANKS chooses
// which ranks print below warning level: "0" (default), "all", or a list
// "0,3,5". Warnings and errors print on every rank. SYNCLINE_LOG_DIR adds
// a file per rank (rank-<r>.log). The backend is spdlog; this header hides it.
//
// Example:
//   syncline::SetLogRank(rank, world);
//   SL_LOG(INFO, "epoch %d loss %.4f", epoch, loss);
#ifndef SYNCLINE_LOG_H_
#define SYNCLINE_LOG_H_

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

enum class LogLevel : int { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// Sets the rank shown in every line and re-reads the SYNCLINE_LOG_* options.
void SetLogRank(int rank, int world_size);

// Whether a message at `level` from this rank would be printed.
bool LogEnabled(LogLevel level);

// Prints one line (already formatted) if enabled.
void LogMessage(LogLevel level, absl::string_view message);

// Prints a warning only once per `key` in this process.
void LogWarnOnce(absl::string_view key, absl::string_view message);

}  // namespace syncline

#define SL_LOG_LEVEL_TRACE ::syncline::LogLevel::kTrace
#define SL_LOG_LEVEL_DEBUG ::syncline::LogLevel::kDebug
#define SL_LOG_LEVEL_INFO ::syncline::LogLevel::kInfo
#define SL_LOG_LEVEL_WARN ::syncline::LogLevel::kWarn
#define SL_LOG_LEVEL_ERROR ::syncline::LogLevel::kError

// SL_LOG(LEVEL, format, args...) with absl::StrFormat syntax.
#define SL_LOG(level, ...)                                              \
  do {                                                                  \
    if (::syncline::LogEnabled(SL_LOG_LEVEL_##level))                   \
      ::syncline::LogMessage(SL_LOG_LEVEL_##level,                      \
                             ::absl::StrFormat(__VA_ARGS__));           \
  } while (0)

#pragma GCC visibility pop

#endif  // SYNCLINE_LOG_H_
