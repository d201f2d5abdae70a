// Gloo bootstrap at scale: what each rank asks of the store.
//
// Gloo's connectFullMesh (Debian's gloo, 2022-05) has every rank write its
// host name and read those of all lower ranks, then publish one blob per
// rank with a 136-byte address for every peer, which every rank reads whole
// to take its own entry out: (N-1)^2 addresses read per rank, O(N^3) bytes
// in all. The gloo backend connects the same mesh itself (mesh.h): a rank
// sets one packed address per peer and gets the N-1 meant for it, nothing
// else. Checked here on real ranks, with a CountingStore limited to Gloo's
// keys: exactly 2 (N-1) requests per rank (N-1 sets, N-1 gets) and N-1
// packed addresses read (6 bytes each for IPv4, 22 for IPv6; the old
// adapter read 136 each, plus host names), and an allreduce whose sums
// prove every pair connected to the right peer.
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
constexpr int kPackedV4Bytes = 6;    // port and IPv4 address
constexpr int kPackedMaxBytes = 22;  // port, IPv6 address and scope id

TEST(GlooBootstrapScale, ARankSetsAndGetsOnePackedAddressPerPeer) {
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
    EXPECT_EQ(store->requests(), 2 * (size - 1))
        << "rank " << rank << " did more than one set and one get per peer";
    EXPECT_GE(store->bytes_read(), (size - 1) * kPackedV4Bytes);
    EXPECT_LE(store->bytes_read(), (size - 1) * kPackedMaxBytes)
        << "rank " << rank << " read more than one packed address per peer";
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
