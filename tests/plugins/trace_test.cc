// The trace interposer over gloo: each rank writes a valid Chrome trace
// with the ops it ran (names, sequence numbers, bytes, status) and prints a
// summary; the merge tool joins the ranks' files; and trace stacked on check
// records what check decided.
#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/scratch_dir.h"
#include "plugins/plugin_test_util.h"

namespace syncline::testing {
namespace {

std::string MakeTempDir() { return ScratchDir(); }

// One line per op event of a trace file: "name:seq:bytes:status", read by
// python3's json module, so the file must be valid JSON.
std::string ListOps(const std::string& file) {
  const std::string script =
      "import json,sys\n"
      "d=json.load(open(sys.argv[1]))\n"
      "for e in d['traceEvents']:\n"
      "  a=e.get('args',{})\n"
      "  if e.get('ph') in ('X','b') and 'seq' in a:\n"
      "    print('%s:%d:%d:%s' % (e['name'].split()[0], a['seq'], a['bytes'], "
      "a['status']))\n";
  CommandResult r =
      RunCommand(absl::StrCat("python3 -c \"", script, "\" ", file), absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 0) << "not valid JSON? " << file << "\n" << r.output;
  return r.output;
}

TEST(TracePlugin, WritesOneTimelinePerRankAndTheToolMergesThem) {
  const std::string dir = MakeTempDir();
  auto results = RunRanks(
      2,
      [](int rank, int size) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        std::vector<float> data(64, 1.0f), part(16, 1.0f), gathered(16 * size);
        std::vector<int32_t> msg(8, rank);
        absl::Duration took;
        ASSERT_TRUE(PostAndWait([&] { return comm->Allreduce(View(data)); }, &took).ok());
        ASSERT_TRUE(PostAndWait([&] { return comm->Broadcast(View(data)); }, &took).ok());
        ASSERT_TRUE(
            PostAndWait([&] { return comm->Allgather(View(part), View(gathered)); },
                        &took)
                .ok());
        ASSERT_TRUE(PostAndWait([&] { return comm->Barrier(); }, &took).ok());
        ASSERT_TRUE(PostAndWait(
                        [&] {
                          return rank == 0 ? comm->Send(View(msg), 1)
                                           : comm->Recv(View(msg), 0);
                        },
                        &took)
                        .ok());
        comm.reset();  // writes the file and the summary
      },
      PluginRun("trace", 30, {{"SYNCLINE_TRACE_DIR", dir}}));
  ExpectAllSucceeded(results);
  for (const RankResult& r : results) {
    EXPECT_TRUE(absl::StrContains(
        r.output, absl::StrCat("syncline trace: rank ", r.rank, "/2 summary")))
        << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "busbw GB/s")) << r.output;
    const std::string ops = ListOps(absl::StrCat(dir, "/trace-rank", r.rank, ".json"));
    for (const char* want : {"allreduce:1:256:ok", "broadcast:2:256:ok",
                             "allgather:3:128:ok", "barrier:4:0:ok"}) {
      EXPECT_TRUE(absl::StrContains(ops, want)) << want << " missing from\n" << ops;
    }
    // Send/recv are numbered apart from the collectives: the first is p2p #1.
    EXPECT_TRUE(absl::StrContains(ops, r.rank == 0 ? "send:1:32:ok" : "recv:1:32:ok"))
        << ops;
  }

  CommandResult merge = RunCommand(absl::StrCat(
      BuildBinDir(), "/syncline-trace-merge -o ", dir, "/merged.json ", dir));
  ASSERT_EQ(merge.exit_code, 0) << merge.output;
  EXPECT_TRUE(absl::StrContains(merge.output, "merged 2 ranks")) << merge.output;
  CommandResult check = RunCommand(absl::StrCat(
      "python3 -c \"import json; d=json.load(open('", dir, "/merged.json')); ",
      "ev=d['traceEvents']; print(sorted({e['pid'] for e in ev}), ",
      "min(e['ts'] for e in ev if 'ts' in e))\""));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_TRUE(absl::StrContains(check.output, "[0, 1] 0")) << check.output;
}

TEST(TracePlugin, StackedOnCheckBothWork) {
  const std::string dir = MakeTempDir();
  auto results = RunRanks(
      2,
      [](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        std::vector<float> data(64, 1.0f), skewed(rank == 0 ? 10 : 20, 1.0f);
        absl::Duration took;
        ASSERT_TRUE(PostAndWait([&] { return comm->Allreduce(View(data)); }, &took).ok());
        EXPECT_EQ(data[0], 2.0f);
        absl::Status status =
            PostAndWait([&] { return comm->Allreduce(View(skewed)); }, &took);
        Note(rank, "mismatched op #2 under trace,check", status, took);
        EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
        EXPECT_TRUE(
            absl::StrContains(status.message(), "rank 1 called allreduce (f32 x 20, sum)"))
            << status;
        comm.reset();
      },
      PluginRun("trace,check", 30, {{"SYNCLINE_TRACE_DIR", dir}}));
  ExpectAllSucceeded(results);
  for (int rank : {0, 1}) {
    const std::string ops = ListOps(absl::StrCat(dir, "/trace-rank", rank, ".json"));
    EXPECT_TRUE(absl::StrContains(ops, "allreduce:1:256:ok")) << ops;
    EXPECT_TRUE(absl::StrContains(
        ops, absl::StrCat("allreduce:2:", rank == 0 ? 40 : 80, ":error")))
        << ops;
    // trace wraps check, so check's own fingerprint exchanges are invisible.
    EXPECT_FALSE(absl::StrContains(ops, "allgather")) << ops;
  }
}

}  // namespace
}  // namespace syncline::testing
