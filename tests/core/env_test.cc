// env_test.cc: the option table is complete and matches the README and the
// core's list of backends.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "backend_catalog.h"
#include "common/scoped_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/env.h"
#include "syncline/store.h"

namespace syncline {
namespace {

// The README's table is the generated one, word for word: a doc string
// changed in env.cc and not regenerated into the README fails here.
TEST(EnvTable, ReadmeHoldsTheGeneratedTable) {
  std::ifstream in(README_PATH);
  ASSERT_TRUE(in.good()) << "cannot read " << README_PATH;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  for (const EnvOption& o : EnvOptions()) {
    EXPECT_THAT(readme, ::testing::HasSubstr(std::string("`") + o.name + "`"))
        << o.name << " is in the option table but not in README.md";
  }
  EXPECT_THAT(readme, ::testing::HasSubstr(FormatEnvTable(/*markdown=*/true)))
      << "README.md's option table differs from core/src/env.cc's; regenerate it "
      << "with `syncline-run --help-env --markdown`";
}

TEST(EnvTable, EveryOptionHasADocString) {
  for (const EnvOption& o : EnvOptions()) {
    EXPECT_GT(std::string(o.doc).size(), 10u) << o.name;
    EXPECT_EQ(std::string(o.name).rfind("SYNCLINE_", 0), 0u) << o.name;
  }
}

// The doc string of SYNCLINE_BACKEND is text (the README table is made from
// it), so it cannot be derived from the core's one list of backends: it is
// checked against it, as are auto's choices.
TEST(EnvTable, BackendDocNamesEveryBackendOfTheTree) {
  std::string doc;
  for (const EnvOption& o : EnvOptions()) {
    if (std::string(o.name) == "SYNCLINE_BACKEND") doc = o.doc;
  }
  ASSERT_FALSE(doc.empty());
  for (const std::string& name : internal::KnownBackends()) {
    EXPECT_THAT(doc, ::testing::HasSubstr(name + ","))
        << name << " is in backend_catalog.cc but not in SYNCLINE_BACKEND's doc string";
  }
  EXPECT_THAT(doc, ::testing::HasSubstr(std::string("auto picks ") +
                                        internal::DefaultBackend(true) + " for CUDA"));
  EXPECT_THAT(doc, ::testing::HasSubstr(std::string(internal::DefaultBackend(false)) +
                                        " otherwise"));
  EXPECT_EQ(internal::BackendsFor(false), "gloo or ucx");
  EXPECT_EQ(internal::BackendsFor(true), "nccl");
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

using ::syncline::testing::ScopedEnv;

// "nan" and "inf" parse as numbers, and each used to mean "no deadline at
// all": a lone rank 0 waited until it was killed. Neither is a deadline.
TEST(EnvTable, DurationsMustBeFiniteAndPositive) {
  for (const char* bad : {"nan", "NaN", "-nan", "inf", "Infinity", "-inf", "1e400", "1e300",
                          "0", "-0", "-5", "0.0"}) {
    ScopedEnv env("SYNCLINE_TIMEOUT", bad);
    absl::StatusOr<absl::Duration> t = EnvSeconds("SYNCLINE_TIMEOUT");
    ASSERT_FALSE(t.ok()) << bad << " gave " << *t;
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << t.status();
    EXPECT_THAT(std::string(t.status().message()),
                ::testing::HasSubstr(std::string("SYNCLINE_TIMEOUT=") + bad +
                                     " is not a finite positive number of seconds"));
  }
  ScopedEnv env("SYNCLINE_TIMEOUT", "1e6");
  absl::StatusOr<absl::Duration> t = EnvSeconds("SYNCLINE_TIMEOUT");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, absl::Seconds(1000000));
}

// The same check where the timeout is read: creating a communicator fails at
// once, naming the variable, instead of running without a deadline.
TEST(EnvTable, CommunicatorRefusesANonFiniteTimeout) {
  for (const char* bad : {"nan", "inf"}) {
    ScopedEnv env("SYNCLINE_TIMEOUT", bad);
    CommunicatorOptions options;
    options.rank = 0;
    options.world_size = 1;
    options.store = MakeHashStore();
    absl::Status s = Communicator::Create(options).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()),
                ::testing::HasSubstr(std::string("SYNCLINE_TIMEOUT=") + bad));
  }
}

TEST(EnvTable, IntegersBelowTheirMinimumAreRejectedWithTheVariableName) {
  {
    ScopedEnv env("SYNCLINE_FLIGHT_RECORDER_SIZE", "-3");
    absl::StatusOr<int64_t> n = EnvInt("SYNCLINE_FLIGHT_RECORDER_SIZE", 1);
    ASSERT_FALSE(n.ok());
    EXPECT_THAT(std::string(n.status().message()),
                ::testing::HasSubstr("SYNCLINE_FLIGHT_RECORDER_SIZE=-3 is below its minimum 1"));
  }
  ScopedEnv env("SYNCLINE_FLIGHT_RECORDER_SIZE", "nan");
  absl::StatusOr<int64_t> n = EnvInt("SYNCLINE_FLIGHT_RECORDER_SIZE", 1);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(std::string(n.status().message()),
              ::testing::HasSubstr("SYNCLINE_FLIGHT_RECORDER_SIZE=nan is not an integer"));
}

}  // namespace
}  // namespace syncline
