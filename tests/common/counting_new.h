// counting_new.h: counts the heap allocations one thread makes, for the
// tests of an op's hot path (how many times an op calls operator new).
//
// It replaces the global operator new and delete (with malloc and free), so
// exactly one source file of a test binary includes it. Only the thread
// that set `counting` counts: progress and publisher threads allocate on
// their own schedules.
//
// Example:
//   syncline::testing::allocations = 0;
//   syncline::testing::counting = true;
//   for (int i = 0; i < kOps; ++i) RunOneOp();
//   syncline::testing::counting = false;
//   EXPECT_LE(syncline::testing::allocations, kOps * kMaxPerOp);
#ifndef SYNCLINE_TESTS_COMMON_COUNTING_NEW_H_
#define SYNCLINE_TESTS_COMMON_COUNTING_NEW_H_

#include <cstddef>
#include <cstdlib>
#include <new>

namespace syncline::testing {

inline thread_local bool counting = false;     // this thread counts while set
inline thread_local size_t allocations = 0;    // operator new calls counted

}  // namespace syncline::testing

// The replacements pair malloc with free, which GCC's
// -Wmismatched-new-delete cannot see through (it flags free() of what it
// takes for operator new's memory).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  if (syncline::testing::counting) ++syncline::testing::allocations;
  if (void* p = std::malloc(size > 0 ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

#endif  // SYNCLINE_TESTS_COMMON_COUNTING_NEW_H_
