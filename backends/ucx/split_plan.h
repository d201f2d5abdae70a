// split_plan.h: who ends up where when a UCX communicator is split.
//
// Communicator::Split (communicator.cc) allgathers one SplitEntry per rank
// over the parent, then every rank computes the same SplitPlan from the
// same table: the members of its color in child-rank order (key, then
// parent rank: the core's rule, so the backend's child ranks are the ranks
// the core reports), and the tag space of each new group (tag.h). Nothing
// here touches UCP, so the rules are unit-tested without a network.
//
// Tag spaces: `next_space` is, per rank, the lowest space never used on its
// worker. The new groups take consecutive spaces starting at the highest
// next_space of the parent's ranks, in increasing color order, so each
// group's space is unused on every member's worker and siblings differ.
// Every rank of the parent (color < 0 included) then advances its
// next_space past them, so the allocation stays monotonic per worker.
//
// Thread safety: pure functions.
//
// Example:
//   std::vector<SplitEntry> all = {{0, 0, 1}, {1, 0, 1}, {0, 5, 1}, {-1, 0, 3}};
//   SplitPlan plan = PlanSplit(all, /*my_rank=*/2);
//   // plan.members == {0, 2}, plan.rank == 1, plan.space == 3 (colors 0, 1
//   // take spaces 3 and 4), plan.next_space == 5.
#ifndef SYNCLINE_BACKENDS_UCX_SPLIT_PLAN_H_
#define SYNCLINE_BACKENDS_UCX_SPLIT_PLAN_H_

#include <cstdint>
#include <vector>

#include "backends/ucx/tag.h"

namespace syncline::ucx_backend {

// One rank's contribution, allgathered over the parent.
struct SplitEntry {
  int64_t color = -1;
  int64_t key = 0;
  int64_t next_space = 1;
};

struct SplitPlan {
  // Parent ranks of this rank's new group in child-rank order; empty when
  // this rank's color is < 0.
  std::vector<int> members;
  int rank = -1;  // this rank's place in `members`
  // The new group's tag space; meaningful only when `exhausted` is false.
  uint32_t space = 0;
  // Every parent rank's next free space after this split.
  int64_t next_space = 1;
  // The family has too few spaces left for every new group: the caller
  // builds the group a fresh worker instead (same decision on every rank).
  bool exhausted = false;
};

// PlanSplit()
//
// `all[r]` is parent rank r's entry; a family may use spaces 0..spaces-1
// (Options::tag_spaces). Every rank computes the same plan for the same
// table (its own `members` and `rank` aside).
SplitPlan PlanSplit(const std::vector<SplitEntry>& all, int my_rank,
                    int64_t spaces = kTagSpaces);

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_SPLIT_PLAN_H_
