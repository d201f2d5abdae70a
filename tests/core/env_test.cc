// env_test.cc: the option table is complete and matches the README.
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/env.h"

namespace syncline {
namespace {

TEST(EnvTable, ReadmeListsEveryOption) {
  std::ifstream in(README_PATH);
  ASSERT_TRUE(in.good()) << "cannot read " << README_PATH;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  for (const EnvOption& o : EnvOptions()) {
    EXPECT_THAT(readme, ::testing::HasSubstr(std::string("`") + o.name + "`"))
        << o.name << " is in the option table but not in README.md; regenerate "
        << "the table with `syncline-run --help-env --markdown`";
  }
}

TEST(EnvTable, EveryOptionHasADocString) {
  for (const EnvOption& o : EnvOptions()) {
    EXPECT_GT(std::string(o.doc).size(), 10u) << o.name;
    EXPECT_EQ(std::string(o.name).rfind("SYNCLINE_", 0), 0u) << o.name;
  }
}

TEST(EnvTable, MalformedNumbersAreRejectedWithTheVariableName) {
  ::setenv("SYNCLINE_TIMEOUT", "soon", 1);
  auto t = EnvSeconds("SYNCLINE_TIMEOUT");
  ::unsetenv("SYNCLINE_TIMEOUT");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), ::testing::HasSubstr("SYNCLINE_TIMEOUT=soon"));
  ::setenv("SYNCLINE_TIMEOUT", "2.5", 1);
  t = EnvSeconds("SYNCLINE_TIMEOUT");
  ::unsetenv("SYNCLINE_TIMEOUT");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, absl::Milliseconds(2500));
}

}  // namespace
}  // namespace syncline
