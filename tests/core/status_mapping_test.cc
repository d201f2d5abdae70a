// status_mapping_test.cc: sl_result_t <-> absl::StatusCode is the table that
// plugin_abi.h documents, one to one, and Work::status() of a running op has
// a code no ended op has.
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "store_adapter.h"
#include "syncline/plugin_abi.h"
#include "syncline/work.h"

namespace syncline {
namespace {

// "kResourceExhausted" -> "RESOURCE_EXHAUSTED", absl::StatusCodeToString's form.
std::string UpperSnake(const std::string& camel) {
  std::string out;
  for (size_t i = 1; i < camel.size(); ++i) {  // skip the leading 'k'
    if (i > 1 && std::isupper(static_cast<unsigned char>(camel[i]))) out += '_';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(camel[i])));
  }
  return out;
}

// Every "SL_X = n, /* ... -> absl kCode */" entry of plugin_abi.h.
std::map<int, std::string> DocumentedMapping() {
  std::ifstream in(PLUGIN_ABI_PATH);
  EXPECT_TRUE(in.good()) << "cannot read " << PLUGIN_ABI_PATH;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t begin = text.find("typedef enum sl_result {");
  const size_t end = text.find("} sl_result_t;");
  EXPECT_NE(begin, std::string::npos);
  EXPECT_NE(end, std::string::npos);
  const std::string body = text.substr(begin, end - begin);
  std::map<int, std::string> documented;
  const std::regex entry(R"((SL_\w+) = (\d+),?\s*/\*[^*]*?-> absl (k\w+) \*/)");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), entry);
       it != std::sregex_iterator(); ++it) {
    documented[std::stoi((*it)[2])] = UpperSnake((*it)[3]);
  }
  return documented;
}

TEST(StatusMapping, MatchesPluginAbiDocumentationForEveryResult) {
  const std::map<int, std::string> documented = DocumentedMapping();
  // SL_OK .. SL_ERR_MISMATCH: every value of the enum is documented.
  ASSERT_EQ(documented.size(), static_cast<size_t>(SL_ERR_MISMATCH) + 1)
      << "each sl_result_t entry must end its comment with '-> absl kCode'";
  for (const auto& [value, code_name] : documented) {
    const absl::StatusCode code = internal::ToStatusCode(static_cast<sl_result_t>(value));
    EXPECT_EQ(absl::StatusCodeToString(code), code_name) << "sl_result_t " << value;
  }
}

TEST(StatusMapping, IsOneToOneAndRoundTrips) {
  std::set<absl::StatusCode> seen;
  for (int value = SL_OK; value <= SL_ERR_MISMATCH; ++value) {
    const auto result = static_cast<sl_result_t>(value);
    const absl::StatusCode code = internal::ToStatusCode(result);
    EXPECT_TRUE(seen.insert(code).second)
        << "two results map to " << absl::StatusCodeToString(code);
    EXPECT_NE(code, absl::StatusCode::kUnknown) << "kUnknown means 'still running'";
    EXPECT_EQ(internal::ToResult(absl::Status(code, code == absl::StatusCode::kOk ? "" : "x")),
              result);
  }
}

TEST(StatusMapping, CodesOutsideTheTableAreInternal) {
  for (int value : {-1, SL_ERR_MISMATCH + 1, 1000}) {
    EXPECT_EQ(internal::ToStatusCode(static_cast<sl_result_t>(value)),
              absl::StatusCode::kInternal)
        << value;
  }
  std::set<absl::StatusCode> mapped;
  for (int value = SL_OK; value <= SL_ERR_MISMATCH; ++value) {
    mapped.insert(internal::ToStatusCode(static_cast<sl_result_t>(value)));
  }
  // absl's codes are 0..16.
  for (int raw = 0; raw <= 16; ++raw) {
    const auto code = static_cast<absl::StatusCode>(raw);
    if (mapped.count(code)) continue;
    EXPECT_EQ(internal::ToResult(absl::Status(code, "x")), SL_ERR_INTERNAL)
        << absl::StatusCodeToString(code);
  }
}

TEST(StatusMapping, StillRunningIsNeitherADeadPeerNorAnyEndedOp) {
  const absl::Status running = StillRunningError("allreduce #3 (f32 x 4, sum)");
  EXPECT_TRUE(IsStillRunning(running));
  EXPECT_EQ(running.message(), "allreduce #3 (f32 x 4, sum) is still running");
  for (int value = SL_OK; value <= SL_ERR_MISMATCH; ++value) {
    const absl::StatusCode code = internal::ToStatusCode(static_cast<sl_result_t>(value));
    EXPECT_FALSE(IsStillRunning(absl::Status(code, "x"))) << absl::StatusCodeToString(code);
  }
}

}  // namespace
}  // namespace syncline
