#include "launcher_test_util.h"

#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/multiprocess.h"
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

std::string MakeTempDir() {
  std::string pattern = ::testing::TempDir() + "/launcher_test.XXXXXX";
  char* dir = mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr) << "mkdtemp " << pattern;
  return pattern;
}

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

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
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
