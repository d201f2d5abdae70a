#include "backends/ucx/split_plan.h"

#include <algorithm>
#include <set>
#include <utility>

namespace syncline::ucx_backend {

SplitPlan PlanSplit(const std::vector<SplitEntry>& all, int my_rank, int64_t spaces) {
  SplitPlan plan;
  int64_t first = 1;
  std::set<int64_t> colors;
  for (const SplitEntry& e : all) {
    first = std::max(first, e.next_space);
    if (e.color >= 0) colors.insert(e.color);
  }
  plan.next_space = first + static_cast<int64_t>(colors.size());
  plan.exhausted = plan.next_space > spaces;
  if (plan.exhausted) plan.next_space = first;  // nothing was taken
  const int64_t color = all[my_rank].color;
  if (color < 0) return plan;
  plan.space =
      static_cast<uint32_t>(first + std::distance(colors.begin(), colors.find(color)));
  std::vector<std::pair<int64_t, int>> keyed;  // (key, parent rank)
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r].color == color) keyed.push_back({all[r].key, r});
  }
  std::sort(keyed.begin(), keyed.end());
  for (const auto& [key, r] : keyed) {
    if (r == my_rank) plan.rank = static_cast<int>(plan.members.size());
    plan.members.push_back(r);
  }
  return plan;
}

}  // namespace syncline::ucx_backend
