// Gloo bootstrap at scale: what each rank reads from the store.
//
// Gloo's connectFullMesh (Debian's gloo, 2022-05) publishes one blob per
// rank with its address for every peer, and every rank reads every other
// blob whole to take its own entry out: (N-1)^2 addresses read per rank,
// O(N^3) bytes in all (a terabyte per rank at 100k ranks). The gloo
// backend's store adapter keeps one key per pair instead, so a rank reads
// N-1 addresses. Checked here on real ranks, with a CountingStore limited
// to Gloo's keys, against the entry size Gloo's tcp addresses have
// (at most gloo::transport::Address::kMaxByteSize bytes), and with an
// allreduce whose sums prove every pair connected to the right peer.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/counting_store.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

constexpr int kRanks = 16;
constexpr int kMaxAddressBytes = 192;  // gloo::transport::Address::kMaxByteSize

TEST(GlooBootstrapScale, ARankReadsNAddressesNotNSquared) {
  auto results = RunRanks(kRanks, [](int rank, int size) {
    std::shared_ptr<Store> job = ConnectJobStore();
    ASSERT_NE(job, nullptr);
    auto store = std::make_shared<CountingStore>(job, nullptr, "gloo/");
    CommunicatorOptions options;
    options.backend = "gloo";
    options.timeout = absl::Seconds(120);
    options.store = store;
    options.rank = rank;
    options.world_size = size;
    auto comm = Communicator::Create(options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::printf("rank %d read %lld bytes of Gloo addresses in %d requests\n", rank,
                static_cast<long long>(store->bytes_read()), store->requests());
    // Every peer's address, plus at most a host name each.
    EXPECT_LE(store->bytes_read(), (size - 1) * (kMaxAddressBytes + 64))
        << "rank " << rank << " read more than one address per peer";
    std::vector<int64_t> data(3, rank + 1);
    auto work = (*comm)->Allreduce(View(data));
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE((*work)->Wait(absl::Seconds(120)).ok());
    for (int64_t v : data) EXPECT_EQ(v, static_cast<int64_t>(size) * (size + 1) / 2);
  }, {.timeout = absl::Seconds(300)});
  ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::testing
