// scratch_dir.h: temporary folders for tests, removed when the test binary
// that made them exits.
//
// Every folder lives under one root in /tmp per test binary, named in
// SYNCLINE_TEST_SCRATCH_ROOT for the processes it starts. Children started by
// RunRanks() run the test's body again and inherit that variable, so their
// folders land under the same root, and the parent removes them all when it
// exits normally (the children leave through _exit() and remove nothing).
//
// Example:
//   const std::string dir = syncline::testing::ScratchDir();  // fresh, empty
#ifndef SYNCLINE_TESTS_COMMON_SCRATCH_DIR_H_
#define SYNCLINE_TESTS_COMMON_SCRATCH_DIR_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace syncline::testing {

inline std::string ScratchDir() {
  static const std::string* root = [] {
    constexpr char kVar[] = "SYNCLINE_TEST_SCRATCH_ROOT";
    if (const char* inherited = std::getenv(kVar); inherited != nullptr && *inherited) {
      return new std::string(inherited);
    }
    char tmpl[] = "/tmp/syncline-test-scratch-XXXXXX";
    auto* path = new std::string(::mkdtemp(tmpl));
    ::setenv(kVar, path->c_str(), 1);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(*root, ignored);
    });
    return path;
  }();
  std::string tmpl = *root + "/XXXXXX";
  return ::mkdtemp(tmpl.data());
}

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_COMMON_SCRATCH_DIR_H_
