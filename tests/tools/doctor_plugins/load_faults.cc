// Backends whose libraries misbehave while loading or at exit, for the
// doctor's isolation (doctor_test.cc), one fault per build:
//   SL_TEST_HANG_ON_LOAD   a constructor that never returns (a driver that
//                          never answers);
//   SL_TEST_CRASH_ON_LOAD  a constructor that dies of SIGSEGV;
//   SL_TEST_HANG_AT_EXIT   a destructor that never returns (a thread pool
//                          joined at exit while its threads still start),
//                          linked with tests/core's fake backend so that the
//                          plugin itself loads and is valid.
#include <signal.h>
#include <unistd.h>

namespace {

#if defined(SL_TEST_HANG_ON_LOAD)
__attribute__((constructor)) void HangWhileLoading() {
  for (;;) ::pause();
}
#elif defined(SL_TEST_CRASH_ON_LOAD)
__attribute__((constructor)) void CrashWhileLoading() { ::raise(SIGSEGV); }
#elif defined(SL_TEST_HANG_AT_EXIT)
__attribute__((destructor)) void HangAtExit() {
  for (;;) ::pause();
}
#else
#error "build with one of SL_TEST_HANG_ON_LOAD, SL_TEST_CRASH_ON_LOAD, SL_TEST_HANG_AT_EXIT"
#endif

}  // namespace
