// backend_params.h: which backends the backend test suites run against.
//
// "gloo" always; any extra names in SYNCLINE_TEST_BACKENDS (comma
// separated, e.g. "ucx,nccl") are added, so a new backend gets the whole
// suite by setting one variable. Test names stay valid gtest identifiers:
// Backends/CollectiveTest.Allreduce/gloo_4ranks.
#ifndef SYNCLINE_TESTS_BACKENDS_BACKEND_PARAMS_H_
#define SYNCLINE_TESTS_BACKENDS_BACKEND_PARAMS_H_

#include <cctype>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace syncline::testing {

struct BackendCase {
  std::string backend;
  int world_size = 1;
};

// gtest prints parameters in test listings and failures.
inline void PrintTo(const BackendCase& c, std::ostream* os) {
  *os << c.backend << " x " << c.world_size << " ranks";
}

// A test binary built for one backend sets SYNCLINE_TEST_BACKENDS_DEFAULT
// (e.g. "ucx") at compile time; the default binary tests gloo.
#ifndef SYNCLINE_TEST_BACKENDS_DEFAULT
#define SYNCLINE_TEST_BACKENDS_DEFAULT "gloo"
#endif

inline std::vector<std::string> TestBackends() {
  std::vector<std::string> names = {SYNCLINE_TEST_BACKENDS_DEFAULT};
  const char* extra = std::getenv("SYNCLINE_TEST_BACKENDS");
  if (extra != nullptr) {
    for (absl::string_view name : absl::StrSplit(extra, ',', absl::SkipWhitespace())) {
      bool seen = false;
      for (const auto& n : names) seen = seen || n == name;
      if (!seen) names.emplace_back(name);
    }
  }
  return names;
}

inline std::vector<BackendCase> BackendCases(std::vector<int> world_sizes) {
  std::vector<BackendCase> cases;
  for (const auto& backend : TestBackends()) {
    for (int size : world_sizes) cases.push_back({backend, size});
  }
  return cases;
}

inline std::string BackendCaseName(const ::testing::TestParamInfo<BackendCase>& info) {
  std::string name =
      info.param.backend + "_" + std::to_string(info.param.world_size) + "ranks";
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_BACKENDS_BACKEND_PARAMS_H_
