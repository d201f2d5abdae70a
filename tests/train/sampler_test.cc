// sampler_test.cc: properties of DistributedSampler and the seeding helpers,
// checked for world sizes 1..5 and dataset sizes that do and do not divide.
// Pure unit tests: one process, no communicator.
#include "syncline/ddp/sampler.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "syncline/ddp/seed.h"

namespace syncline::ddp {
namespace {

std::vector<DistributedSampler> MakeAll(int64_t n, int world, bool shuffle,
                                        bool drop_last, uint64_t seed = 7) {
  std::vector<DistributedSampler> out;
  for (int r = 0; r < world; ++r) {
    auto s = DistributedSampler::Create({.dataset_size = n,
                                         .num_replicas = world,
                                         .rank = r,
                                         .shuffle = shuffle,
                                         .seed = seed,
                                         .drop_last = drop_last});
    EXPECT_TRUE(s.ok()) << s.status();
    out.push_back(*std::move(s));
  }
  return out;
}

// Drains one epoch through NextBatch, as a training loop would.
std::vector<int64_t> Drain(DistributedSampler& s, int64_t batch) {
  std::vector<int64_t> all;
  for (auto b = s.NextBatch(batch); !b.empty(); b = s.NextBatch(batch)) {
    EXPECT_LE(static_cast<int64_t>(b.size()), batch);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

class SamplerProperties
    : public ::testing::TestWithParam<std::tuple<int, int64_t, bool>> {};

TEST_P(SamplerProperties, ShardsAreDisjointAndCoverTheDataset) {
  const auto [world, n, drop_last] = GetParam();
  auto samplers = MakeAll(n, world, /*shuffle=*/true, drop_last);
  const int64_t per_rank = drop_last ? n / world : (n + world - 1) / world;
  std::map<int64_t, int> seen;
  for (auto& s : samplers) {
    ASSERT_EQ(s.num_samples(), per_rank);
    std::vector<int64_t> idx = Drain(s, 3);
    ASSERT_EQ(static_cast<int64_t>(idx.size()), per_rank);
    for (int64_t i : idx) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, n);
      ++seen[i];
    }
  }
  const int64_t total = per_rank * world;
  if (drop_last) {
    // Exactly n - n % world distinct samples, none twice.
    EXPECT_EQ(static_cast<int64_t>(seen.size()), total);
    for (const auto& [i, count] : seen) EXPECT_EQ(count, 1) << "index " << i;
  } else {
    // Every sample at least once; the padding repeats total - n of them.
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
    int64_t repeats = 0;
    for (const auto& [i, count] : seen) repeats += count - 1;
    EXPECT_EQ(repeats, total - n);
  }
}

TEST_P(SamplerProperties, PaddingRepeatsTheStartOfTheOrder) {
  const auto [world, n, drop_last] = GetParam();
  auto samplers = MakeAll(n, world, /*shuffle=*/true, drop_last);
  // Rebuild the global order by interleaving the shards.
  std::vector<int64_t> global(samplers[0].total_size());
  for (int r = 0; r < world; ++r) {
    std::vector<int64_t> idx = samplers[r].Indices();
    for (size_t j = 0; j < idx.size(); ++j) global[j * world + r] = idx[j];
  }
  // Its first min(n, total) entries are a permutation prefix (no repeats);
  // every padding slot k >= n repeats slot (k - n) % n.
  std::set<int64_t> head(global.begin(),
                         global.begin() + std::min<int64_t>(n, global.size()));
  EXPECT_EQ(head.size(), std::min<size_t>(n, global.size()));
  for (size_t k = static_cast<size_t>(n); k < global.size(); ++k) {
    EXPECT_EQ(global[k], global[(k - n) % n]) << "padding slot " << k;
  }
}

TEST_P(SamplerProperties, SameOrderOnEveryRankAndNewOrderPerEpoch) {
  const auto [world, n, drop_last] = GetParam();
  // Two independent constructions agree (nothing depends on the process).
  auto a = MakeAll(n, world, true, drop_last);
  auto b = MakeAll(n, world, true, drop_last);
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(a[r].Indices(), b[r].Indices()) << "rank " << r;
  }
  if (n < 8) return;  // tiny sets may legitimately repeat an order
  std::vector<int64_t> epoch0 = a[0].Indices();
  a[0].SetEpoch(1);
  EXPECT_NE(a[0].Indices(), epoch0);
  a[0].SetEpoch(0);
  EXPECT_EQ(a[0].Indices(), epoch0);
}

TEST_P(SamplerProperties, ResumeMidEpochContinuesWithTheNextBatch) {
  const auto [world, n, drop_last] = GetParam();
  for (int r = 0; r < world; ++r) {
    auto full = MakeAll(n, world, true, drop_last);
    full[r].SetEpoch(3);
    std::vector<int64_t> expected = Drain(full[r], 2);

    auto first = MakeAll(n, world, true, drop_last);
    first[r].SetEpoch(3);
    std::vector<int64_t> got = first[r].NextBatch(2);
    const SamplerState saved = first[r].State();

    auto resumed = MakeAll(n, world, true, drop_last);
    ASSERT_TRUE(resumed[r].Restore(saved).ok());
    resumed[r].SetEpoch(3);  // the loop's usual call must keep the position
    std::vector<int64_t> rest = Drain(resumed[r], 2);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, expected) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldAndSize, SamplerProperties,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values<int64_t>(5, 12, 60, 97,
                                                                       1438),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return "w" + std::to_string(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_drop" : "_pad");
                         });

TEST(DistributedSampler, NoShuffleIsStrided) {
  auto samplers = MakeAll(10, 3, /*shuffle=*/false, /*drop_last=*/false);
  EXPECT_EQ(samplers[0].Indices(), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(samplers[1].Indices(), (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(samplers[2].Indices(), (std::vector<int64_t>{2, 5, 8, 1}));
  samplers[1].SetEpoch(5);  // no shuffle: the epoch does not matter
  EXPECT_EQ(samplers[1].Indices(), (std::vector<int64_t>{1, 4, 7, 0}));
}

TEST(DistributedSampler, DifferentSeedsGiveDifferentOrders) {
  auto a = MakeAll(100, 2, true, false, /*seed=*/1);
  auto b = MakeAll(100, 2, true, false, /*seed=*/2);
  EXPECT_NE(a[0].Indices(), b[0].Indices());
}

TEST(DistributedSampler, RejectsBadOptions) {
  EXPECT_FALSE(DistributedSampler::Create({.dataset_size = -1}).ok());
  EXPECT_FALSE(
      DistributedSampler::Create({.dataset_size = 10, .num_replicas = 2, .rank = 2})
          .ok());
  auto empty = DistributedSampler::Create(
      {.dataset_size = 3, .num_replicas = 4, .rank = 0, .drop_last = true});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no samples"), std::string::npos);
}

TEST(DistributedSampler, RestoreRefusesAStateFromAnotherSetup) {
  auto a = MakeAll(100, 2, true, false);
  auto b = MakeAll(100, 4, true, false);
  absl::Status s = b[0].Restore(a[0].State());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("world size"), std::string::npos) << s;
  auto c = MakeAll(100, 2, true, false, /*seed=*/99);
  EXPECT_FALSE(c[0].Restore(a[0].State()).ok());
}

TEST(DistributedSampler, EpochRewindsAfterAFullPass) {
  auto s = MakeAll(10, 2, true, false);
  std::vector<int64_t> first = Drain(s[0], 4);
  EXPECT_EQ(s[0].position(), 0);
  s[0].SetEpoch(0);  // same epoch again: a fresh pass in the same order
  EXPECT_EQ(Drain(s[0], 4), first);
}

TEST(DistributedSampler, WarnsOnceOnRankZeroWithoutSetEpoch) {
  auto s = MakeAll(10, 2, true, false);
  ::testing::internal::CaptureStderr();
  Drain(s[1], 4);
  Drain(s[1], 4);  // rank 1 repeats an epoch: rank 1 stays quiet
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("SetEpoch"), std::string::npos);
  ::testing::internal::CaptureStderr();
  Drain(s[0], 4);
  s[0].SetEpoch(1);
  Drain(s[0], 4);  // fine: SetEpoch was called
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("SetEpoch"), std::string::npos);
  ::testing::internal::CaptureStderr();
  Drain(s[0], 4);  // a new pass without SetEpoch
  Drain(s[0], 4);  // and again: no second warning
  const std::string err = ::testing::internal::GetCapturedStderr();
  const size_t first = err.find("without SetEpoch");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("without SetEpoch", first + 1), std::string::npos) << err;
}

TEST(Seed, StreamsAreStableAndSeparate) {
  // Pinned values: a change here changes every run's data order.
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(ModelInitSeed(42), 42u);
  EXPECT_EQ(DataOrderSeed(1, 0), DataOrderSeed(1, 0));
  EXPECT_NE(DataOrderSeed(1, 0), DataOrderSeed(1, 1));
  std::set<uint64_t> seeds;
  for (int rank = 0; rank < 8; ++rank) {
    for (int epoch = 0; epoch < 8; ++epoch) {
      seeds.insert(AugmentationSeed(5, rank, epoch));
    }
  }
  EXPECT_EQ(seeds.size(), 64u);
}

TEST(Seed, RngIsUniformEnoughAndShuffles) {
  Rng rng(3);
  std::vector<int> counts(10);
  for (int i = 0; i < 100000; ++i) ++counts[rng.Below(10)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
  std::vector<int64_t> v(50);
  for (int i = 0; i < 50; ++i) v[i] = i;
  std::vector<int64_t> w = v;
  Rng(4).Shuffle(w);
  EXPECT_NE(v, w);
  std::sort(w.begin(), w.end());
  EXPECT_EQ(v, w);
}

}  // namespace
}  // namespace syncline::ddp
