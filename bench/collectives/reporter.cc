#include "bench/collectives/reporter.h"

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <utility>

namespace syncline::bench {
namespace {

bool Reduces(Op op) {
  return op == Op::kAllreduce || op == Op::kReduceScatter || op == Op::kReduce;
}

double Counter(const benchmark::BenchmarkReporter::Run& run, const char* name) {
  const auto it = run.counters.find(name);
  return it == run.counters.end() ? 0.0 : static_cast<double>(it->second);
}

}  // namespace

NcclTableReporter::NcclTableReporter(std::map<std::string, CaseInfo> cases,
                                     std::string banner, int interleaved_repetitions)
    : cases_(std::move(cases)),
      banner_(std::move(banner)),
      interleaved_repetitions_(interleaved_repetitions) {}

bool NcclTableReporter::ReportContext(const Context& /*context*/) {
  std::printf("%s", banner_.c_str());
  std::fflush(stdout);
  return true;
}

Row NcclTableReporter::MakeRow(const CaseInfo& info) const {
  Row row;
  row.system = info.system;
  row.op = OpName(info.op);
  row.dtype = DataTypeName(info.dtype);
  row.redop = Reduces(info.op) ? ReduceOpName(info.redop) : "none";
  row.ranks = info.ranks;
  row.bytes = info.layout.bytes;
  row.count = info.layout.count;
  return row;
}

void NcclTableReporter::ReportRuns(const std::vector<Run>& runs) {
  // With repetitions the runs are aggregates (median, mean, stddev, cv);
  // with one repetition there is a single plain run.
  const Run* median = nullptr;
  const Run* mean = nullptr;
  for (const Run& run : runs) {
    if (run.run_type == Run::RT_Iteration && median == nullptr) median = &run;
    if (run.aggregate_name == "median") median = &run;
    if (run.aggregate_name == "mean") mean = &run;
  }
  if (median == nullptr) return;
  const std::string& name = median->run_name.function_name;
  const auto it = cases_.find(name);
  if (it == cases_.end()) return;
  const CaseInfo& info = it->second;
  if (median->error_occurred) {
    std::printf("# %s: %s\n", median->benchmark_name().c_str(),
                median->error_message.c_str());
    return;
  }

  if (interleaved_repetitions_ > 0) {
    auto [partial, inserted] = partial_.try_emplace(name, MakeRow(info));
    Row& row = partial->second;
    row.samples_us.push_back(Counter(*median, "time_us"));
    row.wrong += static_cast<int64_t>(Counter(*median, "wrong") + 0.5);
    if (static_cast<int>(row.samples_us.size()) == interleaved_repetitions_) {
      row.time_us = Median(row.samples_us);
      ComputeBandwidth(&row);
      finished_.push_back(row);
      partial_.erase(partial);
    }
    return;
  }

  Row row = MakeRow(info);
  row.time_us = Counter(*median, "time_us");
  ComputeBandwidth(&row);
  const double repetitions = static_cast<double>(std::max<int64_t>(median->repetitions, 1));
  row.wrong = static_cast<int64_t>(
      (mean != nullptr ? Counter(*mean, "wrong") * repetitions : Counter(*median, "wrong")) +
      0.5);
  Print(row);
}

void NcclTableReporter::Finalize() {
  // Interleaved rows completed variant after variant; print them grouped.
  std::stable_sort(finished_.begin(), finished_.end(), [](const Row& a, const Row& b) {
    return std::tie(a.system, a.ranks, a.op, a.dtype, a.bytes) <
           std::tie(b.system, b.ranks, b.op, b.dtype, b.bytes);
  });
  for (const Row& row : finished_) Print(row);
  finished_.clear();
}

void NcclTableReporter::Print(const Row& row) {
  const std::string section = row.system + "/" + std::to_string(row.ranks) + "/" +
                              row.op + "/" + row.dtype;
  if (section != section_) {
    section_ = section;
    std::printf("\n# %s, %d ranks, %s, %s, redop %s\n%s\n", row.system.c_str(),
                row.ranks, row.op.c_str(), row.dtype.c_str(), row.redop.c_str(),
                TableHeader().c_str());
  }
  std::printf("%s\n", TableLine(row).c_str());
  std::fflush(stdout);
  rows_.push_back(row);
}

}  // namespace syncline::bench
