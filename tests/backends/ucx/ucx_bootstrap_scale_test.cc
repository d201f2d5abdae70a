// UCX bootstrap at scale: what each rank reads from the store.
//
// An all-to-all exchange of worker addresses makes every rank read N-1
// records, N(N-1) in all: at 100k ranks and ~200 bytes a record, 2 TB
// through one store. The backend publishes its record and connects lazily
// (backends/ucx/bootstrap.h): a rank reads a peer's record only when it
// first talks to it. These tests run real ranks, each with a CountingStore
// limited to the address keys ("ucx/peer/"), and check, against the peers
// the algorithms' patterns name (computed here, independently):
//   - after comm_create and a small allreduce, a rank has read at most
//     2 + log2(N) records (its ring neighbours for the hello, its recursive
//     doubling partners), not N-1, and the allreduce sums are right;
//   - an alltoall then connects to everyone, still once per peer, and
//     delivers every block to its place.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/counting_store.h"
#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "tests/backends/ucx/ucx_test_util.h"

namespace syncline::testing {
namespace {

constexpr absl::Duration kWait = absl::Seconds(120);
constexpr int kRanks = 32;

// A client of the job's store, counting the UCX address reads only.
std::shared_ptr<CountingStore> CountedJobStore() {
  std::shared_ptr<Store> job = JobStore();
  return job ? std::make_shared<CountingStore>(job, nullptr, "ucx/peer/") : nullptr;
}

TEST(UcxBootstrapScale, ARankReadsLogNAddressesNotN) {
  auto results = RunRanks(kRanks, [](int rank, int size) {
    auto store = CountedJobStore();
    ASSERT_NE(store, nullptr);
    auto comm = CreateUcx(store, rank, size, "", kWait);
    ASSERT_NE(comm, nullptr);
    // Eight bytes: recursive doubling (or a ring on a crowded machine).
    std::vector<int64_t> data(1, rank + 1);
    auto work = comm->Allreduce(View(data));
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE((*work)->Wait(kWait).ok());
    EXPECT_EQ(data[0], static_cast<int64_t>(size) * (size + 1) / 2);
    const int log2n = static_cast<int>(std::lround(std::log2(size)));
    const int bound = 2 + log2n;  // hello: r-1, r+1; doubling: r^1, r^2, ...
    std::printf("rank %d read %d UCX address records (%lld bytes); bound %d, eager %d\n",
                rank, store->requests(), static_cast<long long>(store->bytes_read()),
                bound, size - 1);
    // Its own Set counts once.
    EXPECT_LE(store->requests() - 1, bound)
        << "rank " << rank << " read more peers' addresses than it talks to";
    EXPECT_GT(store->bytes_read(), 0);

    // An alltoall talks to everyone: each peer's record is read once.
    std::vector<int32_t> send(size), recv(size, -1);
    for (int r = 0; r < size; ++r) send[r] = rank * 1000 + r;
    auto a2a = comm->Alltoall(View(send), View(recv));
    ASSERT_TRUE(a2a.ok()) << a2a.status();
    ASSERT_TRUE((*a2a)->Wait(kWait).ok());
    for (int r = 0; r < size; ++r) ASSERT_EQ(recv[r], r * 1000 + rank) << "block " << r;
    EXPECT_EQ(store->requests() - 1, size - 1) << "each peer's record read once";
  }, {.timeout = absl::Seconds(300)});
  ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::testing
