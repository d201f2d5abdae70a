#include "launcher_test_util.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/multiprocess.h"
#include "common/scratch_dir.h"
#include "gtest/gtest.h"

namespace syncline::testing {

std::string Launcher() { return BuildBinDir() + "/syncline-run"; }

std::string AllreduceExample() { return BuildBinDir() + "/syncline-allreduce-example"; }

bool GlooPluginBuilt() {
  struct stat st;
  return stat((BuildLibDir() + "/libsyncline-backend-gloo.so").c_str(), &st) == 0;
}

std::string ShellQuote(absl::string_view s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

std::string MakeTempDir() { return ScratchDir(); }

std::string WriteScript(const std::string& dir, const std::string& name,
                        const std::string& body) {
  std::string path = dir + "/" + name;
  {
    std::ofstream out(path);
    out << "#!/bin/sh\n" << body << "\n";
  }
  EXPECT_EQ(chmod(path.c_str(), 0755), 0) << path;
  return path;
}

std::string WaitForFile(const std::string& path, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  struct stat st;
  while (stat(path.c_str(), &st) != 0) {
    if (absl::Now() > deadline) return "";
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string TokenEnv() {
  return absl::StrCat("SYNCLINE_STORE_TOKEN=test-secret-", getpid(), " ");
}

std::string TwoNodeScript(
    const std::function<std::string(int rank, const std::string& port)>& node) {
  std::string out = ShellQuote(MakeTempDir() + "/node0.out");
  return absl::StrCat(
      node(0, "0"), " > ", out, " 2>&1 & n0=$!\n",
      // Until node 0 reports its port, or dies without doing so.
      "until port=$(sed -n 's/.*store at 127\\.0\\.0\\.1:\\([0-9]*\\).*/\\1/p' ", out,
      " | head -n 1); [ -n \"$port\" ] || ! kill -0 $n0 2>/dev/null; do sleep 0.02; done\n",
      node(1, "\"${port:-1}\""), "; s1=$?; wait $n0; s0=$?; cat ", out,
      "; echo \"status=$s0,$s1\"");
}

int ReportedStorePort(absl::string_view output) {
  constexpr absl::string_view kMark = "store at 127.0.0.1:";
  size_t at = output.find(kMark);
  if (at == absl::string_view::npos) return 0;
  absl::string_view rest = output.substr(at + kMark.size());
  int port = 0;
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  return absl::SimpleAtoi(rest.substr(0, digits), &port) ? port : 0;
}

std::vector<std::string> LinesWithPrefix(absl::string_view output,
                                         absl::string_view prefix) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::ConsumePrefix(&line, prefix)) lines.emplace_back(line);
  }
  return lines;
}

std::map<std::string, std::string> ParseAssignments(absl::string_view line) {
  std::map<std::string, std::string> out;
  for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(word, '=');
    out[kv.first] = kv.second;
  }
  return out;
}

int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
}

}  // namespace syncline::testing
