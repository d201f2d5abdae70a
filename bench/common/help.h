// help.h: --help of the benchmark programs, in tools/cli's layout.
//
// The benchmarks parse their own `--name=value` arguments, so they list
// their options as cli::Option values (spelled as they are accepted) and
// print them through cli::PrintHelpIfAsked, exactly as syncline-run and
// syncline-train print theirs. The options that the table programs share
// (the size schedule of bench_common.h, warmup, repetitions, the JSON rows)
// are written once here.
//
// Example:
//   std::vector<cli::Option> options = {{"--threads=N", "", "Threads.", "2"}};
//   AppendSharedOptions({"min_bytes", "max_bytes", "json"}, &options);
//   if (cli::PrintHelpIfAsked(argc, argv, usage, options)) return 0;
#ifndef SYNCLINE_BENCH_COMMON_HELP_H_
#define SYNCLINE_BENCH_COMMON_HELP_H_

#include <string>
#include <vector>

#include "tools/cli/usage.h"

namespace syncline::bench {

// Appends the shared options named in `names` ("min_bytes", "max_bytes",
// "factor", "warmup", "repetitions", "json"), in that order, to `options`.
// An unknown name is a programming error: it aborts with a message.
void AppendSharedOptions(const std::vector<std::string>& names,
                         std::vector<cli::Option>* options);

}  // namespace syncline::bench

#endif  // SYNCLINE_BENCH_COMMON_HELP_H_
