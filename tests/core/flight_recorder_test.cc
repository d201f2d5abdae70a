// flight_recorder_test.cc: the op ring, its dumps, and the desync report that
// names the rank that never joined an op.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using testing::RunOptions;
using testing::RunRanks;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Communicator> MakeSolo() {
  CommunicatorOptions options;
  options.rank = 0;
  options.world_size = 1;
  options.backend = "gloo";
  auto comm = Communicator::Create(options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

TEST(FlightRecorder, RecordsEveryOpWithItsState) {
  auto comm = MakeSolo();
  ASSERT_NE(comm, nullptr);
  std::vector<float> x(256, 1.0f);
  for (int i = 0; i < 3; ++i) {
    auto w = comm->Allreduce(View(x));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Wait(absl::Seconds(5)).ok());
  }
  std::string json = comm->DumpFlightRecorder();
  EXPECT_THAT(json, HasSubstr("\"last_posted\":3"));
  EXPECT_THAT(json, HasSubstr("\"last_completed\":3"));
  EXPECT_THAT(json, HasSubstr("\"seq\":3,\"op\":\"allreduce #3 (f32 x 256, sum)"));
  EXPECT_THAT(json, HasSubstr("\"bytes\":1024,\"state\":\"completed\""));
}

TEST(FlightRecorder, RingKeepsTheLastN) {
  ::setenv("SYNCLINE_FLIGHT_RECORDER_SIZE", "4", 1);
  auto comm = MakeSolo();
  ::unsetenv("SYNCLINE_FLIGHT_RECORDER_SIZE");
  ASSERT_NE(comm, nullptr);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*comm->Barrier())->Wait().ok());
  std::string json = comm->DumpFlightRecorder();
  EXPECT_THAT(json, HasSubstr("\"seq\":10"));
  EXPECT_THAT(json, HasSubstr("\"seq\":7"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("\"seq\":6,")));
  // Completion finds each op in the wrapped ring: none is left "posted".
  EXPECT_THAT(json, ::testing::Not(HasSubstr("\"state\":\"posted\"")));
  EXPECT_THAT(json, HasSubstr("\"seq\":8,\"op\":\"barrier #8 on rank 0/1 over"));
}

TEST(FlightRecorder, Sigusr1DumpsEveryCommunicator) {
  char dir[] = "/tmp/syncline-fr-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  ::setenv("SYNCLINE_DEBUG_DIR", dir, 1);
  auto comm = MakeSolo();
  ASSERT_NE(comm, nullptr);
  ASSERT_TRUE((*comm->Barrier())->Wait().ok());
  ::raise(SIGUSR1);
  std::string found;
  for (int i = 0; i < 200 && found.empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    for (int id = 1; id < 64 && found.empty(); ++id) {
      std::string path = absl::StrCat(dir, "/syncline-flight-rank0-comm", id, ".json");
      if (Slurp(path).find("barrier #1") != std::string::npos) found = path;
    }
  }
  ::unsetenv("SYNCLINE_DEBUG_DIR");
  EXPECT_FALSE(found.empty()) << "no flight recorder dump in " << dir << " after SIGUSR1";
}

TEST(FlightRecorder, TimeoutReportNamesTheRankThatNeverJoined) {
  RunOptions options{.timeout = absl::Seconds(60)};
  options.env = {{"SYNCLINE_BACKEND", "gloo"}, {"SYNCLINE_TIMEOUT", "3"},
                 {"SYNCLINE_DEBUG_DIR", "/tmp"}};
  auto results = RunRanks(3, [](int rank, int) {
    auto comm = Communicator::Create({});
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::vector<int32_t> x(64, rank);
    ASSERT_TRUE((*(*comm)->Allreduce(View(x)))->Wait().ok());  // op #1, all ranks
    if (rank == 2) {
      absl::SleepFor(absl::Seconds(6));  // never calls op #2, but stays alive
      ::_exit(0);
    }
    auto work = (*comm)->Allreduce(View(x));  // op #2
    ASSERT_TRUE(work.ok());
    absl::Status st = (*work)->Wait();
    std::fprintf(stderr, "RESULT: %s\n", st.ToString().c_str());
    std::fflush(stderr);
    ::_exit(st.ok() ? 0 : 3);
  }, options);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exit_code, 3) << results[r].output;
    EXPECT_THAT(results[r].output, HasSubstr("allreduce #2"));
    EXPECT_THAT(results[r].output, HasSubstr("desync report for op #2: ranks [2] never joined op #2"));
    EXPECT_THAT(results[r].output, HasSubstr("rank 2: last posted #1, last completed #1"));
    EXPECT_THAT(results[r].output, HasSubstr("flight recorder: /tmp/syncline-flight-rank"));
    EXPECT_LT(results[r].seconds, 8.0) << "op timeout 3 s plus the report";
  }
}

TEST(FlightRecorder, DumpedWhenAPeerDies) {
  RunOptions options{.timeout = absl::Seconds(60)};
  options.env = {{"SYNCLINE_BACKEND", "gloo"}, {"SYNCLINE_TIMEOUT", "10"},
                 {"SYNCLINE_DEBUG_DIR", "/tmp"}};
  auto results = RunRanks(2, [](int rank, int) {
    auto comm = Communicator::Create({});
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::vector<int32_t> x(64, rank);
    ASSERT_TRUE((*(*comm)->Allreduce(View(x)))->Wait().ok());
    if (rank == 1) ::raise(SIGKILL);
    absl::SleepFor(absl::Milliseconds(200));
    absl::Status st = (*(*comm)->Allreduce(View(x)))->Wait();
    std::fprintf(stderr, "RESULT: %s\n", st.ToString().c_str());
    std::fflush(stderr);
    ::_exit(st.ok() ? 0 : 3);
  }, options);
  EXPECT_EQ(results[1].signal, SIGKILL);
  EXPECT_EQ(results[0].exit_code, 3) << results[0].output;
  EXPECT_THAT(results[0].output, HasSubstr("allreduce #2"));
  EXPECT_THAT(results[0].output, HasSubstr("flight recorder: /tmp/syncline-flight-rank0"));
  EXPECT_LT(results[0].seconds, 8.0) << "a dead peer is not a timeout";
}

}  // namespace
}  // namespace syncline
