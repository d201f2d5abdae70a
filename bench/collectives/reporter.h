// reporter.h: Google Benchmark results as an nccl-tests table.
//
// The collective benchmark registers one Google Benchmark case per (backend,
// op, dtype, size) with fixed iterations and repetitions, and sets counters
// per repetition: time_us (the slowest rank's mean op time), algbw, busbw and
// wrong (the wrong elements of that repetition, summed over ranks). This
// reporter turns the aggregates into nccl-tests' rows: the median over the
// repetitions of time_us, algbw and busbw, and #wrong summed over all
// repetitions. It prints a section header whenever the backend, rank count,
// op or dtype changes, and keeps the rows for the JSON file.
//
// Interleaved mode (interleaved_repetitions > 0): each case is registered
// that many times with one repetition each, alternating with the other
// variants' cases; the reporter gathers a case's runs, and once it has all
// of them makes the row (median time, every repetition in samples_us). The
// rows are printed at the end, grouped by system.
//
// Thread safety: Google Benchmark calls it from the thread that runs the
// benchmarks; rows() is read after RunSpecifiedBenchmarks() returns.
#ifndef SYNCLINE_BENCH_COLLECTIVES_REPORTER_H_
#define SYNCLINE_BENCH_COLLECTIVES_REPORTER_H_

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

#include "bench/collectives/data.h"
#include "bench/common/bench_common.h"
#include "syncline/types.h"

namespace syncline::bench {

// What one registered benchmark measures; keyed by its registered name.
struct CaseInfo {
  std::string system;  // "syncline-gloo"
  Op op = Op::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp redop = ReduceOp::kSum;
  int ranks = 1;
  OpLayout layout;
  bool in_place = false;  // an allreduce whose input is its output
};

class NcclTableReporter : public benchmark::BenchmarkReporter {
 public:
  // `banner` is printed once before the first table (machine, date, ...).
  NcclTableReporter(std::map<std::string, CaseInfo> cases, std::string banner,
                    int interleaved_repetitions = 0);

  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

  const std::vector<Row>& rows() const { return rows_; }

 private:
  Row MakeRow(const CaseInfo& info) const;
  void Print(const Row& row);

  std::map<std::string, CaseInfo> cases_;
  std::string banner_;
  int interleaved_repetitions_;
  std::string section_;  // the (system, ranks, op, dtype) of the last row
  std::vector<Row> rows_;
  // Interleaved mode: each case's row so far (samples_us and wrong filled
  // run by run), by registered name, and the rows complete so far.
  std::map<std::string, Row> partial_;
  std::vector<Row> finished_;
};

// Prints nothing: the reporter of every rank but rank 0.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace syncline::bench

#endif  // SYNCLINE_BENCH_COLLECTIVES_REPORTER_H_
