// status.cc: the abort path of SL_CHECK.
#include "syncline/status.h"

#include <cstdio>
#include <cstdlib>

namespace syncline::internal {

void CheckFailed(const char* file, int line, const char* cond,
                 const char* msg) {
  std::fprintf(stderr, "syncline: invariant broken at %s:%d: %s (%s)\n", file,
               line, cond, msg);
  std::fflush(stderr);
  std::abort();
}

}  // namespace syncline::internal
