// communicator_test.cc: backend agreement and input validation in the core.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/diagnostics.h"
#include "syncline/tcp_store.h"
#include "syncline/types.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunOptions;
using testing::RunRanks;

// Rank body: create a communicator and print the outcome between markers.
void CreateAndReport(int, int) {
  auto comm = Communicator::Create({});
  std::fprintf(stderr, "RESULT: %s\nEND\n", comm.status().ToString().c_str());
  std::fflush(stderr);
  ::_exit(comm.ok() ? 0 : 3);
}

std::string Verdict(const testing::RankResult& r) {
  size_t at = r.output.find("RESULT: ");
  if (at == std::string::npos) return "(no result)";
  return r.output.substr(at, r.output.find("\nEND\n", at) - at);
}

// Runs `size` ranks on gloo, with `odd_env` on `odd_rank`, and rank 0
// hosting the store (as without a launcher). Checks that every rank failed
// with the very same verdict, at the agreement rather than at the init
// timeout, and returns it.
std::string RunDisagreement(int size, int odd_rank,
                            std::map<std::string, std::string> odd_env) {
  // The promise is "before the init timeout". The timeout is long, so that a
  // loaded machine cannot reach it; a rank that waited for it instead of
  // hearing the verdict is killed by the harness first and fails below.
  constexpr double kInitTimeoutSeconds = 300;
  RunOptions options{.timeout = absl::Seconds(240),
                     .env = {{"SYNCLINE_BACKEND", "gloo"},
                             {"SYNCLINE_TIMEOUT", absl::StrCat(kInitTimeoutSeconds)}},
                     .rank_env = {{odd_rank, std::move(odd_env)}},
                     .host_store = false};
  auto results = RunRanks(size, CreateAndReport, options);
  EXPECT_EQ(results.size(), static_cast<size_t>(size));
  if (results.empty()) return "";
  for (const auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " waited for the timeout:\n" << r.output;
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_EQ(Verdict(r), Verdict(results[0])) << "rank " << r.rank << " heard another verdict";
    EXPECT_THAT(Verdict(r), Not(HasSubstr("DEADLINE_EXCEEDED")))
        << "must fail at the agreement, not at the timeout";
    EXPECT_LT(r.seconds, kInitTimeoutSeconds) << "must fail before the init timeout";
  }
  return Verdict(results[0]);
}

// One rank differs from the others; every rank must hear the same verdict,
// naming which ranks chose what.
struct Disagreement {
  std::string name;
  int size;
  int odd_rank;
  std::map<std::string, std::string> odd_env;
  // Parts of the verdict; "{gloo}" and "{ucx}" stand for what each rank that
  // loads that backend reports, as ProbeBackends() finds it here.
  std::vector<std::string> expected;
};

// "gloo (plugin ABI 1, <its version>)", the choice a rank reports.
std::string Choice(const std::string& backend, const std::string& suffix = "") {
  for (const BackendProbe& p : ProbeBackends()) {
    if (p.name == backend && p.loaded) {
      return absl::StrFormat("%s (plugin ABI %u, %s%s)", backend, p.abi_version, p.detail,
                             suffix);
    }
  }
  ADD_FAILURE() << backend << " does not load here";
  return backend;
}

void PrintTo(const Disagreement& d, std::ostream* os) { *os << d.name; }

class BackendAgreement : public ::testing::TestWithParam<Disagreement> {};

TEST_P(BackendAgreement, EveryRankHearsTheSameVerdict) {
  const Disagreement& d = GetParam();
  std::string verdict = RunDisagreement(d.size, d.odd_rank, d.odd_env);
  for (std::string part : d.expected) {
    part = absl::StrReplaceAll(part, {{"{gloo+check}", Choice("gloo", " +check")},
                                      {"{gloo}", Choice("gloo")},
                                      {"{ucx}", Choice("ucx")}});
    EXPECT_THAT(verdict, HasSubstr(part));
  }
}

std::vector<Disagreement> Disagreements() {
  std::vector<Disagreement> cases = {
      {"OneRankCannotLoadItsBackend", 3, 1, {{"SYNCLINE_BACKEND", "nosuch"}},
       {"RESULT: FAILED_PRECONDITION: no common backend: ranks 0,2, 2 in all chose {gloo}; "
        "rank 1 could not load its backend: cannot load backend 'nosuch'"}}};
#ifdef SYNCLINE_TEST_UCX
  cases.push_back({"GlooAndUcx", 4, 2, {{"SYNCLINE_BACKEND", "ucx"}},
                   {"RESULT: FAILED_PRECONDITION: ranks disagree on the backend: ranks 0-1,3, "
                    "3 in all chose {gloo}; rank 2 chose {ucx}. Set the same SYNCLINE_BACKEND "
                    "and SYNCLINE_PLUGINS"}});
#endif
#ifdef SYNCLINE_TEST_INTERPOSERS
  cases.push_back({"CheckOnOneRankOnly", 3, 0, {{"SYNCLINE_PLUGINS", "check"}},
                   {"RESULT: FAILED_PRECONDITION: ranks disagree on the backend: rank 0 chose "
                    "{gloo+check}; ranks 1-2, 2 in all chose {gloo}. Set the same "
                    "SYNCLINE_BACKEND"}});
#endif
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, BackendAgreement, ::testing::ValuesIn(Disagreements()),
                         [](const auto& info) { return info.param.name; });

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CommunicatorOptions options;
    options.rank = 0;
    options.world_size = 1;
    options.backend = "gloo";
    auto comm = Communicator::Create(options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = std::move(comm).value();
  }
  std::unique_ptr<Communicator> comm_;
};

TEST_F(ValidationTest, MismatchedCountsNameTheOpAndSequenceNumber) {
  std::vector<float> a(4), b(5);
  auto w = comm_->Allreduce(View(a), View(b));
  ASSERT_TRUE(absl::IsInvalidArgument(w.status())) << w.status();
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("allreduce #1 (f32 x 4, sum)"));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("recv has 5"));
  auto g = comm_->Allgather(View(a), View(b));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("allgather #2"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("send.count * size = 4"));
}

TEST_F(ValidationTest, RootAndPeerOutOfRange) {
  std::vector<int32_t> a(4);
  auto w = comm_->Broadcast(View(a), {.root = 3});
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("root 3 is not a rank"));
  auto s = comm_->Send(View(a), 0);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("peer 0 must be another rank"));
}

TEST_F(ValidationTest, CudaBufferOnACpuBackendSaysWhichBackendAcceptsIt) {
  std::vector<float> a(4);
  BufferView v = View(a);
  v.device = Device::Cuda(0);
  auto w = comm_->Allreduce(v);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("the buffer is on cuda:0"));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("SYNCLINE_BACKEND=nccl"));
}

TEST_F(ValidationTest, SequenceNumbersAdvancePerOp) {
  std::vector<double> a = {1, 2, 3};
  auto w1 = comm_->Allreduce(View(a));
  ASSERT_TRUE(w1.ok()) << w1.status();
  ASSERT_TRUE((*w1)->Wait(absl::Seconds(5)).ok());
  auto w2 = comm_->Barrier();
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ((*w1)->seq(), 1u);
  EXPECT_EQ((*w2)->seq(), 2u);
  EXPECT_THAT((*w2)->Describe(), HasSubstr("barrier #2 on rank 0/1 over gloo"));
  EXPECT_EQ(a, (std::vector<double>{1, 2, 3}));  // world size 1: identity
}

// Issue 13: the harness probed a free port for rank 0's store and released
// it before use, so another program could take it first. A run whose rank 0
// finds its port taken is repeated on a fresh one, and the ranks then meet.
TEST(HarnessTest, RankZeroHostedRunRetriesWhenItsPortIsTaken) {
  // Another program's store on the port rank 0 is told to use: rank 0 cannot
  // bind it, and rank 1 is refused (another token) instead of joining it.
  auto squatter = TcpStoreServer::Start({.host = "127.0.0.1", .port = 0, .token = "other"});
  ASSERT_TRUE(squatter.ok()) << squatter.status();
  RunOptions options{.timeout = absl::Seconds(60)};
  options.host_store = false;
  options.first_port = (*squatter)->port();
  options.env = {{"SYNCLINE_BACKEND", "gloo"}, {"SYNCLINE_TIMEOUT", "20"}};
  ::testing::internal::CaptureStderr();
  auto results = RunRanks(2, [](int rank, int size) {
    auto comm = Communicator::Create({});
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::vector<int32_t> x = {rank + 1, 10 * (rank + 1)};
    ASSERT_TRUE((*(*comm)->Allreduce(View(x)))->Wait().ok());
    EXPECT_EQ(x, (std::vector<int32_t>{3, 30})) << "world size " << size;
  }, options);
  const std::string parent = ::testing::internal::GetCapturedStderr();
  testing::ExpectAllSucceeded(results);
  EXPECT_THAT(parent, HasSubstr(absl::StrCat("port ", options.first_port,
                                             " was taken before rank 0 bound it; retrying")));
  TcpStoreClientOptions other{.port = (*squatter)->port()};
  other.token = "other";
  auto store = ConnectTcpStore(other);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->NumKeys(), 0) << "a rank wrote into the other program's store";
}

}  // namespace
}  // namespace syncline
