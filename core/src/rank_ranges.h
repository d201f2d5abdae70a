// rank_ranges.h: ranks as ranges, for messages that list ranks.
//
// A message about a 4,096-rank job cannot print 4,096 numbers. Every message
// that lists ranks (the rendezvous, the backend agreement) goes through
// FormatRanks(), so they all read alike: "rank 7", "ranks 5-1023, 1019 in all",
// "ranks 0-3,7,9-12, 10 in all".
#ifndef SYNCLINE_CORE_SRC_RANK_RANGES_H_
#define SYNCLINE_CORE_SRC_RANK_RANGES_H_

#include <string>
#include <vector>

namespace syncline::internal {

// FormatRanks()
//
// Sorts and de-duplicates `ranks`, then joins runs of consecutive ranks into
// "a-b". One rank reads "rank 7"; several read "ranks 0-3,7, 5 in all"; none
// reads "no ranks". At most `max_runs` runs are printed, then "..." (the
// count stays exact).
//
// Example:
//   FormatRanks({5, 6, 7, 9})  // "ranks 5-7,9, 4 in all"
std::string FormatRanks(std::vector<int> ranks, int max_runs = 32);

}  // namespace syncline::internal

#endif  // SYNCLINE_CORE_SRC_RANK_RANGES_H_
