// usage.h: --help for Syncline's programs, in torchrun's layout.
//
// absl's own --help prints "Flags from <file>:" and the flags' underscored
// names. Programs of this project document dashed names (--node-rank) and
// accept both, so their help is rendered here from the same absl flag
// definitions: a "usage:" line, the description, then "options:" with one
// entry per flag (dashed name, metavar, help, default), then an epilog.
//
// Programs that parse their own arguments (the benchmarks) list their
// options as Option values and get the same layout.
//
// Example:
//   syncline::cli::Usage usage{"syncline-doctor", "", "Reports what ...", ""};
//   if (syncline::cli::PrintHelpIfAsked(argc, argv, usage, "syncline_doctor/")) return 0;
//
//   // Without absl flags:
//   const std::vector<syncline::cli::Option> options = {
//       {"--iters", "N", "Timed iterations per size.", "20"}};
//   if (syncline::cli::PrintHelpIfAsked(argc, argv, usage, options)) return 0;
#ifndef SYNCLINE_TOOLS_CLI_USAGE_H_
#define SYNCLINE_TOOLS_CLI_USAGE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace syncline::cli {

struct Usage {
  std::string program;  // "syncline-run"
  std::string
      positional;  // after the options in the usage line, e.g. "-- program [args...]"
  std::string description;  // a paragraph or more
  std::string epilog;       // printed after the options
  // Extra spellings shown beside a flag, by its absl name (Option::flag
  // without dashes, with underscores): {"n", "--nproc-per-node"}.
  std::vector<std::pair<std::string, std::string>> aliases;
};

// One option of a program that parses its own arguments.
struct Option {
  std::string flag;           // as the program accepts it: "--iters", "--min_bytes"
  std::string metavar;        // "N"; empty for a switch that takes no value
  std::string help;           // a sentence or more
  std::string default_value;  // shown as "(default: 20)"; empty: none shown
};

// The help text for the absl flags defined in files whose path contains
// `source_part` (e.g. "syncline_run/"), sorted by name.
std::string FormatUsage(const Usage& usage, absl::string_view source_part);
// The help text for `options`, in the order given.
std::string FormatUsage(const Usage& usage, const std::vector<Option>& options);

// When argv (before a "--") holds -h, --help, --helpfull or --helpshort,
// prints FormatUsage to stdout and returns true.
bool PrintHelpIfAsked(int argc, char** argv, const Usage& usage,
                      absl::string_view source_part);
// The same over arguments already split from a program's command line
// (syncline-run's own, before the worker's).
bool PrintHelpIfAsked(const std::vector<std::string>& args, const Usage& usage,
                      absl::string_view source_part);
// The same for a program that lists its options itself.
bool PrintHelpIfAsked(int argc, char** argv, const Usage& usage,
                      const std::vector<Option>& options);

// The whole start of a program without positional arguments: prints the
// help and returns 0 when asked; otherwise parses argv with absl (dashed or
// underscored names) and returns 2 after a message on a stray argument, or
// -1 when the program should go on.
int ParseOrHelp(int argc, char** argv, const Usage& usage, absl::string_view source_part);

// "--batch-size=32" -> "--batch_size=32": flag names only, never values,
// up to a "--". argv[0] is kept.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv);

}  // namespace syncline::cli

#endif  // SYNCLINE_TOOLS_CLI_USAGE_H_
