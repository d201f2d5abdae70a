// Who drives UCP while an op waits for a peer (backends/ucx/progress.cc):
// a thread in Wait() busy-polls for busy_poll_us after the last event and
// then sleeps in poll() on the worker. While it sleeps it makes no passes,
// so its op looks idle to the background progress thread, which found the
// driver lock taken and tried again at once: it spun for as long as the
// wait slept (a core's worth of CPU beside a blocked wait; the Completer of
// the PyTorch module waits so for each DDP bucket while backward runs).
// And the waiter went back to busy-polling after every wake-up from
// poll(), with or without an event: a tenth of a core while a peer is late.
// CPU time is a count of what a thread ran, not a wall-clock figure, so
// the bound holds on a loaded machine; the held-back peer makes the wait
// long enough to tell a sleeper from a spinner.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline::testing {
namespace {

double CpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(UcxProgress, ABlockedWaitLeavesTheOtherThreadsIdle) {
  auto results = RunRanks(2, [](int rank, int size) {
    CommunicatorOptions options;
    options.backend = "ucx";
    auto comm = Communicator::Create(options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    constexpr auto kHold = std::chrono::seconds(1);
    float x[4];
    for (int i = 0; i < 4; ++i) x[i] = static_cast<float>(rank * 10 + i);
    // Rank 1 joins the allreduce kHold after rank 0 (both leave Create
    // together: its hello), so rank 0's Wait() sleeps most of that time.
    if (rank == 1) std::this_thread::sleep_for(kHold);
    const double process0 = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
    const double own0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    const auto start = std::chrono::steady_clock::now();
    auto work = (*comm)->Allreduce(View(x, 4));
    ASSERT_TRUE(work.ok()) << work.status();
    const absl::Status waited = (*work)->Wait();
    ASSERT_TRUE(waited.ok()) << waited;
    const double waited_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double own = CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - own0;
    const double others = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - process0 - own;
    for (int i = 0; i < 4; ++i) {  // the oracle: both ranks' inputs, summed here
      float sum = 0;
      for (int r = 0; r < size; ++r) sum += static_cast<float>(r * 10 + i);
      ASSERT_EQ(x[i], sum) << "element " << i;
    }
    if (rank != 0) return;
    std::printf("rank 0 waited %.0f ms, using %.1f ms of CPU; its other threads used %.1f ms\n",
                waited_s * 1e3, own * 1e3, others * 1e3);
    std::fflush(stdout);
    // The window is real: rank 1 held its part back.
    EXPECT_GE(waited_s, 0.5);
    // Before: 0.75-0.78 s of it at load 13 (one spinning thread); after: 15-22 ms.
    EXPECT_LT(others, waited_s / 10) << "the other threads spun during a blocked wait";
    // The waiter itself: busy_poll_us (1 ms) after the post, then asleep in
    // poll(), waking every 10 ms. Before: 86-91 ms (it polled 1 ms after
    // every wake-up, events or not); after: 5-7 ms.
    EXPECT_LT(own, waited_s / 30) << "the waiting thread polled between wake-ups";
  });
  ExpectAllSucceeded(results);
  if (!results.empty()) std::printf("%s", results[0].output.c_str());  // the figures
}

}  // namespace
}  // namespace syncline::testing
