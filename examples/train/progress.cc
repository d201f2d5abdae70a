// progress.cc: progress bar and plain epoch lines.
#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "syncline/env.h"
#include "syncline/log.h"

namespace syncline::train {
namespace {

constexpr int kBarWidth = 30;

}  // namespace

Progress::Progress(int rank, int world_size) {
  // The core's log filter already applies SYNCLINE_LOG_RANKS and the level.
  print_ = LogEnabled(LogLevel::kInfo);
  bar_ = print_ && rank == 0 && ::isatty(STDOUT_FILENO) != 0;
  const std::string ranks = EnvString("SYNCLINE_LOG_RANKS");
  if (world_size > 1 && ranks != "0") {
    prefix_ = absl::StrCat("[rank ", rank, "/", world_size, "] ");
  }
}

void Progress::Step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps,
                    double loss) {
  if (!bar_) return;
  const absl::Time now = absl::Now();
  if (step != steps && now - last_draw_ < absl::Milliseconds(100)) return;
  last_draw_ = now;
  const int filled = steps > 0 ? static_cast<int>(kBarWidth * step / steps) : kBarWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  std::printf("\repoch %lld/%lld [%s] %lld/%lld loss %.4f ",
              static_cast<long long>(epoch), static_cast<long long>(epochs), bar.c_str(),
              static_cast<long long>(step), static_cast<long long>(steps), loss);
  std::fflush(stdout);
  bar_visible_ = true;
}

void Progress::ClearBar() {
  if (!bar_visible_) return;
  std::printf("\r\033[K");
  bar_visible_ = false;
}

void Progress::Line(const std::string& line) {
  if (!print_) return;
  ClearBar();
  std::printf("%s%s\n", prefix_.c_str(), line.c_str());
  std::fflush(stdout);
}

}  // namespace syncline::train
