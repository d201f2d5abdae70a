// sampler_data_loader_test.cc: DistributedSampler as the sampler of
// torch::data::make_data_loader, as a libtorch user writes it: no adapter,
// SetEpoch() on the caller's copy reaches the loader's, shards stay disjoint
// and cover the dataset, a loader with worker threads gets exactly one pass,
// a broken-off pass restarts at the top, a restored position resumes, and
// the missing-set_epoch warning still fires.
#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/ddp/error.h"
#include "syncline/ddp/sampler.h"

namespace syncline::ddp {
namespace {

// Example i is the scalar tensor i, so a batch shows which indices it got.
class IndexDataset : public torch::data::datasets::Dataset<IndexDataset> {
 public:
  explicit IndexDataset(size_t n) : n_(n) {}
  ExampleType get(size_t index) override {
    return {torch::tensor(static_cast<int64_t>(index)), torch::tensor(0)};
  }
  torch::optional<size_t> size() const override { return n_; }

 private:
  size_t n_;
};

DistributedSamplerOptions Options(int64_t n, int world, int rank) {
  DistributedSamplerOptions o;
  o.dataset_size = n;
  o.num_replicas = world;
  o.rank = rank;
  o.seed = 11;
  return o;
}

template <typename Loader>
std::vector<int64_t> OnePass(Loader& loader, size_t* batches = nullptr) {
  std::vector<int64_t> seen;
  size_t count = 0;
  for (auto& batch : loader) {
    ++count;
    for (int64_t i = 0; i < batch.data.size(0); ++i) {
      seen.push_back(batch.data[i].template item<int64_t>());
    }
  }
  if (batches != nullptr) *batches = count;
  return seen;
}

auto MakeLoader(size_t n, const DistributedSampler& sampler, size_t workers = 0) {
  return torch::data::make_data_loader(
      IndexDataset(n).map(torch::data::transforms::Stack<>()), sampler,
      torch::data::DataLoaderOptions().batch_size(4).workers(workers));
}

TEST(SamplerDataLoader, ShardsAreDisjointCoverTheDatasetAndFollowSetEpoch) {
  constexpr int64_t kN = 37;
  constexpr int kWorld = 3;
  std::vector<DistributedSampler> samplers;
  for (int r = 0; r < kWorld; ++r) samplers.emplace_back(Options(kN, kWorld, r));
  std::vector<std::vector<int64_t>> epoch0(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    auto loader = MakeLoader(kN, samplers[r]);
    samplers[r].set_epoch(0);
    epoch0[r] = OnePass(*loader);
    EXPECT_EQ(epoch0[r], samplers[r].Indices()) << "rank " << r;
    // The caller's copy drives the loader's copy.
    samplers[r].set_epoch(1);
    std::vector<int64_t> epoch1 = OnePass(*loader);
    EXPECT_EQ(epoch1, samplers[r].Indices()) << "rank " << r;
    EXPECT_NE(epoch1, epoch0[r]) << "epoch 1 must reshuffle";
  }
  std::multiset<int64_t> all;
  for (const auto& shard : epoch0) all.insert(shard.begin(), shard.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(13 * kWorld)) << "padded to 39";
  for (int64_t i = 0; i < kN; ++i) EXPECT_GE(all.count(i), 1u) << i;
}

TEST(SamplerDataLoader, WorkerThreadsGetExactlyOnePass) {
  DistributedSampler sampler(Options(50, 2, 1));
  auto loader = MakeLoader(50, sampler, /*workers=*/2);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    sampler.set_epoch(epoch);
    size_t batches = 0;
    std::vector<int64_t> seen = OnePass(*loader, &batches);
    EXPECT_EQ(batches, 7u) << "25 samples in batches of 4";
    std::vector<int64_t> expected = sampler.Indices();
    std::sort(seen.begin(), seen.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(seen, expected) << "epoch " << epoch;
  }
}

TEST(SamplerDataLoader, ABrokenOffPassRestartsAtTheTop) {
  DistributedSampler sampler(Options(40, 2, 0));
  auto loader = MakeLoader(40, sampler);
  sampler.set_epoch(0);
  int taken = 0;
  for (auto& batch : *loader) {
    (void)batch;
    if (++taken == 2) break;
  }
  sampler.set_epoch(1);
  EXPECT_EQ(OnePass(*loader), sampler.Indices());
}

TEST(SamplerDataLoader, ARestoredPositionResumes) {
  DistributedSampler first(Options(40, 2, 0));
  first.set_epoch(2);
  first.NextBatch(4);
  first.NextBatch(4);
  const SamplerState saved = first.State();

  DistributedSampler resumed(Options(40, 2, 0));
  ASSERT_TRUE(resumed.Restore(saved).ok());
  auto loader = MakeLoader(40, resumed);
  resumed.set_epoch(2);  // the loop's usual call keeps the position
  const std::vector<int64_t> all = resumed.Indices();
  EXPECT_EQ(OnePass(*loader), std::vector<int64_t>(all.begin() + 8, all.end()));
}

TEST(SamplerDataLoader, ASecondPassWithoutSetEpochWarnsOnce) {
  DistributedSampler sampler(Options(20, 2, 0));
  auto loader = MakeLoader(20, sampler);
  ::testing::internal::CaptureStderr();
  const std::vector<int64_t> first = OnePass(*loader);
  const std::vector<int64_t> second = OnePass(*loader);
  OnePass(*loader);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(first, second) << "no SetEpoch: the same order";
  const size_t at = err.find("without SetEpoch");
  ASSERT_NE(at, std::string::npos) << err;
  EXPECT_EQ(err.find("without SetEpoch", at + 1), std::string::npos) << err;
}

TEST(SamplerDataLoader, BadOptionsAndAnotherDatasetSizeThrow) {
  DistributedSamplerOptions bad = Options(10, 2, 2);
  try {
    DistributedSampler sampler(bad);
    FAIL() << "rank 2 of 2 was accepted";
  } catch (const Error& e) {  // a c10::Error, as libtorch's own
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("rank 2 is not in [0, num_replicas=2)"));
  }
  DistributedSampler sampler(Options(10, 2, 0));
  try {
    sampler.reset(11);
    FAIL() << "a reset to another size was accepted";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("made for 10"));
  }
  sampler.reset(10);  // the same size is fine
}

}  // namespace
}  // namespace syncline::ddp
