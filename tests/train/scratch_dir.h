// scratch_dir.h: temporary folders for the train tests.
//
// Every folder lives under one per-process root in /tmp, removed when the
// test binary exits normally. Children started by RunRanks() leave through
// _exit() and so never remove the parent's files.
//
// Example:
//   const std::string dir = syncline::testing::ScratchDir();  // fresh, empty
#ifndef SYNCLINE_TESTS_TRAIN_SCRATCH_DIR_H_
#define SYNCLINE_TESTS_TRAIN_SCRATCH_DIR_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace syncline::testing {

inline std::string ScratchDir() {
  static const std::string* root = [] {
    char tmpl[] = "/tmp/syncline-train-test-XXXXXX";
    auto* path = new std::string(::mkdtemp(tmpl));
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

#endif  // SYNCLINE_TESTS_TRAIN_SCRATCH_DIR_H_
