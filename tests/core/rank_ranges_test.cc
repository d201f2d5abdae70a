// rank_ranges_test.cc: ranks as ranges in messages (core/src/rank_ranges.h).
#include "rank_ranges.h"

#include <vector>

#include "gtest/gtest.h"

namespace syncline::internal {
namespace {

TEST(FormatRanks, OneRankNoneAndARange) {
  EXPECT_EQ(FormatRanks({}), "no ranks");
  EXPECT_EQ(FormatRanks({7}), "rank 7");
  std::vector<int> late;
  for (int r = 5; r <= 1023; ++r) late.push_back(r);
  EXPECT_EQ(FormatRanks(late), "ranks 5-1023, 1019 in all");
}

TEST(FormatRanks, SortsDeduplicatesAndJoinsRuns) {
  EXPECT_EQ(FormatRanks({9, 3, 1, 2, 2}), "ranks 1-3,9, 4 in all");
  EXPECT_EQ(FormatRanks({4, 6}), "ranks 4,6, 2 in all");
  EXPECT_EQ(FormatRanks({0, 1}), "ranks 0-1, 2 in all");
}

TEST(FormatRanks, ManyRunsAreCutButTheCountStaysExact) {
  std::vector<int> even;
  for (int r = 0; r <= 20; r += 2) even.push_back(r);  // 11 runs of one
  EXPECT_EQ(FormatRanks(even, 3), "ranks 0,2,4,..., 11 in all");
  EXPECT_EQ(FormatRanks(even, 11), "ranks 0,2,4,6,8,10,12,14,16,18,20, 11 in all");
}

}  // namespace
}  // namespace syncline::internal
