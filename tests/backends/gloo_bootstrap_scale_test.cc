// Gloo bootstrap at scale: what each rank asks of the store.
//
// Gloo's connectFullMesh (Debian's gloo, 2022-05) has every rank write its
// host name and read those of all lower ranks, then publish one blob per
// rank with a 136-byte address for every peer, which every rank reads whole
// to take its own entry out: (N-1)^2 addresses read per rank, O(N^3) bytes
// in all. The gloo backend connects the same mesh itself (mesh.h): only
// the pairs to ranks r +- 2^k go through the store, one packed address per
// pair, and the other pairs' addresses travel over those pairs (Bruck's
// all-to-all). Checked here on real ranks at 6, 11 and 16, with a
// CountingStore limited to Gloo's keys: exactly 2 requests per partner (a
// set and a get; 14 at 16 ranks, where the old adapter made 31-32) and one
// packed address read per partner (6 bytes for IPv4, 22 for IPv6; the old
// adapter read 136 per peer, plus host names); then an allreduce, and an
// alltoall, which sends on every pair, so a pair wired to the wrong peer
// shows as a wrong block.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/counting_store.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

constexpr int kPackedV4Bytes = 6;    // port and IPv4 address
constexpr int kPackedMaxBytes = 22;  // port, IPv6 address and scope id

CommunicatorOptions GlooOptions(std::shared_ptr<Store> store, int rank, int size,
                                absl::Duration timeout) {
  CommunicatorOptions options;
  options.backend = "gloo";
  options.timeout = timeout;
  options.store = std::move(store);
  options.rank = rank;
  options.world_size = size;
  return options;
}

// World sizes: 16 (a power of two), and 6 and 11, whose partner sets wrap
// around unevenly and whose all-to-all rounds move uneven block counts.
class GlooBootstrapScale : public ::testing::TestWithParam<int> {};

TEST_P(GlooBootstrapScale, ARankSetsAndGetsOnePackedAddressPerPartner) {
  auto results = RunRanks(GetParam(), [](int rank, int size) {
    std::shared_ptr<Store> job = ConnectJobStore();
    ASSERT_NE(job, nullptr);
    auto store = std::make_shared<CountingStore>(job, nullptr, "gloo/");
    auto comm = Communicator::Create(GlooOptions(store, rank, size, absl::Seconds(120)));
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::printf("rank %d read %lld bytes of Gloo addresses in %d requests\n", rank,
                static_cast<long long>(store->bytes_read()), store->requests());
    // Through the store: only the pairs to rank +- 1, 2, 4, ... (mod size),
    // 7 of 15 at 16 ranks.
    std::set<int> partners;
    for (int step = 1; step < size; step *= 2) {
      partners.insert((rank + step) % size);
      partners.insert((rank - step + size) % size);
    }
    const int n = static_cast<int>(partners.size());
    if (size == 16) {
      ASSERT_EQ(n, 7);
    }
    EXPECT_EQ(store->requests(), 2 * n)
        << "rank " << rank << " went to the store for more than its " << n << " partners";
    EXPECT_GE(store->bytes_read(), n * kPackedV4Bytes);
    EXPECT_LE(store->bytes_read(), n * kPackedMaxBytes)
        << "rank " << rank << " read more than one packed address per partner";
    std::vector<int64_t> data(3, rank + 1);
    auto work = (*comm)->Allreduce(View(data));
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE((*work)->Wait(absl::Seconds(120)).ok());
    for (int64_t v : data) EXPECT_EQ(v, static_cast<int64_t>(size) * (size + 1) / 2);
    // Gloo's alltoall sends over every pair, so a pair wired to the wrong
    // peer (an address that reached the wrong rank) delivers a wrong block.
    std::vector<int64_t> out(size), in(size, -1);
    for (int j = 0; j < size; ++j) out[j] = 1000 * rank + j;
    auto exchange = (*comm)->Alltoall(View(out), View(in));
    ASSERT_TRUE(exchange.ok()) << exchange.status();
    ASSERT_TRUE((*exchange)->Wait(absl::Seconds(120)).ok());
    for (int i = 0; i < size; ++i) {
      EXPECT_EQ(in[i], 1000 * i + rank) << "rank " << rank << "'s block from rank " << i;
    }
  }, {.timeout = absl::Seconds(300)});
  ExpectAllSucceeded(results);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooBootstrapScale, ::testing::Values(6, 11, 16));

// A rank that dies in the middle of the bootstrap (after publishing its
// addresses, at its first read) fails every other rank within about the
// bootstrap timeout (Gloo alone would wait 5x it on each pair that listens,
// in turn), never a hang, each naming the peer or the exchange that failed
// it.
TEST(GlooBootstrapFault, ARankThatDiesMidBootstrapFailsTheOthersInTime) {
  constexpr int kVictim = 5;
  auto results = RunRanks(8, [](int rank, int size) {
    std::shared_ptr<Store> job = ConnectJobStore();
    ASSERT_NE(job, nullptr);
    auto store = std::make_shared<CountingStore>(job, [rank](absl::string_view key) {
      if (rank == kVictim && key.find("gloo/p/") != absl::string_view::npos) std::_Exit(0);
    });
    const absl::Time start = absl::Now();
    auto comm = Communicator::Create(GlooOptions(store, rank, size, absl::Seconds(3)));
    const absl::Duration took = absl::Now() - start;
    ASSERT_FALSE(comm.ok()) << "rank " << rank << " created a communicator without rank 5";
    EXPECT_LT(took, absl::Seconds(12)) << comm.status();  // Gloo alone: >= 15 s
    const std::string message(comm.status().message());
    std::printf("rank %d failed after %s: %s\n", rank, absl::FormatDuration(took).c_str(),
                message.c_str());
    // Whichever peer failed first is named: rank 5, or a rank that failed
    // on it and closed its pairs, or the exchange that stalled.
    EXPECT_TRUE(message.find("rank 5") != std::string::npos ||
                message.find("connecting the pair to rank") != std::string::npos ||
                message.find("all-to-all") != std::string::npos)
        << message;
  }, {.timeout = absl::Seconds(120)});
  ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::testing
