// rank_ranges.cc: ranks as ranges (see rank_ranges.h).
#include "rank_ranges.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace syncline::internal {

std::string FormatRanks(std::vector<int> ranks, int max_runs) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) return "no ranks";
  if (ranks.size() == 1) return absl::StrCat("rank ", ranks[0]);
  std::string out = "ranks ";
  int runs = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (runs == max_runs) {
      absl::StrAppend(&out, ",...");
      break;
    }
    absl::StrAppend(&out, runs > 0 ? "," : "", ranks[i]);
    if (j > i) absl::StrAppend(&out, "-", ranks[j]);
    ++runs;
    i = j + 1;
  }
  absl::StrAppend(&out, ", ", ranks.size(), " in all");
  return out;
}

}  // namespace syncline::internal
