#include "bench/common/bench_common.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace syncline::bench {
namespace {

// About this much traffic per repetition fixes the iteration count.
constexpr double kBytesPerRepetition = 16.0 * (1 << 20);
constexpr int kMinIterations = 3;
constexpr int kMaxIterations = 100;

struct OpEntry {
  Op op;
  const char* name;
};
constexpr OpEntry kOps[] = {
    {Op::kAllreduce, "allreduce"},
    {Op::kAllgather, "allgather"},
    {Op::kReduceScatter, "reduce_scatter"},
    {Op::kBroadcast, "broadcast"},
    {Op::kAlltoall, "alltoall"},
    {Op::kReduce, "reduce"},
};

// JSON strings here are names we chose; escape the two characters that
// could still break the document.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

const char* OpName(Op op) {
  for (const OpEntry& entry : kOps) {
    if (entry.op == op) return entry.name;
  }
  return "?";
}

std::optional<Op> ParseOp(const std::string& name) {
  for (const OpEntry& entry : kOps) {
    if (name == entry.name) return entry.op;
  }
  return std::nullopt;
}

double BusFactor(Op op, int ranks) {
  if (ranks <= 1) return op == Op::kBroadcast || op == Op::kReduce ? 1.0 : 0.0;
  const double n = ranks;
  switch (op) {
    case Op::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Op::kAllgather:
    case Op::kReduceScatter:
    case Op::kAlltoall:
      return (n - 1) / n;
    case Op::kBroadcast:
    case Op::kReduce:
      return 1.0;
  }
  return 1.0;
}

std::vector<size_t> Sizes(const SizeSchedule& schedule) {
  // Anchored at the maximum so that the round sizes people quote (1 MiB,
  // 16 MiB, 64 MiB) are measured: max, max/f, max/f^2, ... down to min.
  const size_t factor = static_cast<size_t>(std::max(2, schedule.factor));
  const size_t min_bytes = std::max<size_t>(1, schedule.min_bytes);
  std::vector<size_t> sizes;
  for (size_t bytes = std::max(schedule.max_bytes, min_bytes); bytes > min_bytes;
       bytes /= factor) {
    sizes.push_back(bytes);
  }
  sizes.push_back(min_bytes);
  std::reverse(sizes.begin(), sizes.end());
  return sizes;
}

int IterationsFor(size_t bytes) {
  const double iters = kBytesPerRepetition / static_cast<double>(std::max<size_t>(bytes, 1));
  return static_cast<int>(std::clamp(iters, double{kMinIterations}, double{kMaxIterations}));
}

int64_t WarmFor(double ms, const std::function<void()>& run_op,
                const std::function<bool(bool)>& all_done) {
  if (ms <= 0) return 0;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int64_t ran = 0;
  for (int64_t chunk = 1;; chunk *= 2) {
    for (int64_t i = 0; i < chunk; ++i) run_op();
    ran += chunk;
    const double elapsed_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (all_done(elapsed_ms >= ms)) return ran;
  }
}

std::optional<size_t> ParseBytes(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return std::nullopt;
  std::string suffix(end);
  size_t shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GiB") {
    shift = 30;
  } else if (!suffix.empty() && suffix != "B") {
    return std::nullopt;
  }
  return static_cast<size_t>(value) << shift;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

void ComputeBandwidth(Row* row) {
  const auto op = ParseOp(row->op);
  const double seconds = row->time_us * 1e-6;
  row->algbw = seconds > 0 ? static_cast<double>(row->bytes) / seconds / 1e9 : 0;
  row->busbw = op ? row->algbw * BusFactor(*op, row->ranks) : row->algbw;
}

std::string TableHeader() {
  char line[256];
  std::snprintf(line, sizeof(line),
                "#%14s %12s %6s %6s %10s %8s %8s %7s\n"
                "#%14s %12s %6s %6s %10s %8s %8s %7s",
                "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong",
                "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  return line;
}

std::string TableLine(const Row& row) {
  char line[256];
  std::snprintf(line, sizeof(line), " %14zu %12zu %6s %6s %10.2f %8.3f %8.3f %7lld",
                row.bytes, row.count, row.dtype.c_str(), row.redop.c_str(), row.time_us,
                row.algbw, row.busbw, static_cast<long long>(row.wrong));
  return line;
}

std::string RowJson(const Row& row) {
  char numbers[256];
  std::snprintf(numbers, sizeof(numbers),
                "\"ranks\": %d, \"bytes\": %zu, \"count\": %zu, \"time_us\": %.4f, "
                "\"algbw\": %.6f, \"busbw\": %.6f, \"wrong\": %lld",
                row.ranks, row.bytes, row.count, row.time_us, row.algbw, row.busbw,
                static_cast<long long>(row.wrong));
  std::string samples;
  if (!row.samples_us.empty()) {
    samples = ", \"samples_us\": [";
    for (size_t i = 0; i < row.samples_us.size(); ++i) {
      char value[32];
      std::snprintf(value, sizeof(value), "%s%.4f", i == 0 ? "" : ", ",
                    row.samples_us[i]);
      samples += value;
    }
    samples += "]";
  }
  return "{\"system\": " + Quoted(row.system) + ", \"op\": " + Quoted(row.op) +
         ", \"dtype\": " + Quoted(row.dtype) + ", \"redop\": " + Quoted(row.redop) +
         ", " + numbers + samples + "}";
}

bool WriteRowsJson(const std::string& path, const std::string& program,
                   const std::vector<Row>& rows) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return false;
  out << "{\"program\": " << Quoted(program) << ", \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    out << "  " << RowJson(rows[i]) << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  out << "]}\n";
  return static_cast<bool>(out);
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

void MaxOfDoubles(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<double*>(out);
  const auto* x = static_cast<const double*>(a);
  const auto* y = static_cast<const double*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = std::max(x[i], y[i]);
}

}  // namespace syncline::bench
