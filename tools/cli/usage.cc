// usage.cc: torchrun-style --help from absl flag definitions.
#include "tools/cli/usage.h"

#include <algorithm>
#include <cstdio>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace syncline::cli {
namespace {

constexpr size_t kWidth = 80;
constexpr size_t kHelpColumn = 24;

std::string Dashed(absl::string_view name) {
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

std::string Metavar(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<bool>()) return "";
  return absl::AsciiStrToUpper(flag.Name());  // argparse's metavar: NODE_RANK
}

// "--node-rank" for the absl flag node_rank, "-n" for n.
std::string FlagOf(absl::string_view name) {
  return absl::StrCat(name.size() == 1 ? "-" : "--", Dashed(name));
}

std::string Spelling(const Option& option) {
  return absl::StrCat(option.flag, option.metavar.empty() ? "" : " ", option.metavar);
}

// Wraps `text` to kWidth, every line indented by `indent`, the first line
// starting at column `first_column` (already written).
void AppendWrapped(std::string* out, absl::string_view text, size_t indent,
                   size_t first_column) {
  size_t column = first_column;
  bool line_empty = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line_empty && column + 1 + word.size() > kWidth) {
      absl::StrAppend(out, "\n", std::string(indent, ' '));
      column = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out->push_back(' ');
      ++column;
    }
    absl::StrAppend(out, word);
    column += word.size();
    line_empty = false;
  }
  out->push_back('\n');
}

// The default as absl holds it, in the form Option::default_value takes
// ("'127.0.0.1'" for strings, "on" for a true bool); empty: not shown.
std::string DefaultOf(const absl::CommandLineFlag& flag) {
  std::string value = flag.DefaultValue();
  if (flag.IsOfType<std::string>())
    return value.empty() ? "" : absl::StrCat("'", value, "'");
  if (flag.IsOfType<bool>()) return value == "true" ? "on" : "";
  return value;
}

bool IsHelpRequest(absl::string_view arg) {
  return arg == "-h" || arg == "--h" || arg == "--help" || arg == "-help" ||
         arg == "--helpfull" || arg == "--helpshort";
}

bool HelpAsked(const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (IsHelpRequest(args[i])) return true;
  }
  return false;
}

void Print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

std::string FormatUsage(const Usage& usage, absl::string_view source_part) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), source_part)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::vector<Option> options;
  for (const auto* flag : flags) {
    options.push_back(
        {FlagOf(flag->Name()), Metavar(*flag), flag->Help(), DefaultOf(*flag)});
  }
  return FormatUsage(usage, options);
}

std::string FormatUsage(const Usage& usage, const std::vector<Option>& options) {
  std::string out = absl::StrCat("usage: ", usage.program);
  std::string line = out;
  auto add = [&](const std::string& piece) {
    if (line.size() + 1 + piece.size() > kWidth) {
      absl::StrAppend(&out, "\n", std::string(7 + usage.program.size(), ' '));
      line = std::string(7 + usage.program.size(), ' ');
    } else {
      out.push_back(' ');
      line.push_back(' ');
    }
    absl::StrAppend(&out, piece);
    absl::StrAppend(&line, piece);
  };
  add("[-h]");
  for (const Option& option : options) add(absl::StrCat("[", Spelling(option), "]"));
  if (!usage.positional.empty()) add(usage.positional);
  absl::StrAppend(&out, "\n\n");
  for (absl::string_view paragraph : absl::StrSplit(usage.description, "\n\n")) {
    AppendWrapped(&out, absl::StrReplaceAll(paragraph, {{"\n", " "}}), 0, 0);
    out.push_back('\n');
  }
  absl::StrAppend(&out, "options:\n");
  auto entry = [&](const std::string& left, const std::string& help) {
    std::string head = absl::StrCat("  ", left);
    if (head.size() + 2 > kHelpColumn) {
      absl::StrAppend(&out, head, "\n", std::string(kHelpColumn, ' '));
    } else {
      absl::StrAppend(&out, head, std::string(kHelpColumn - head.size(), ' '));
    }
    AppendWrapped(&out, help, kHelpColumn, kHelpColumn);
  };
  entry("-h, --help", "show this help message and exit");
  for (const Option& option : options) {
    std::string left = Spelling(option);
    for (const auto& [name, alias] : usage.aliases) {
      if (FlagOf(name) == option.flag) left = absl::StrCat(alias, ", ", left);
    }
    entry(left,
          option.default_value.empty()
              ? option.help
              : absl::StrCat(option.help, " (default: ", option.default_value, ")"));
  }
  if (!usage.epilog.empty()) {
    out.push_back('\n');
    for (absl::string_view paragraph : absl::StrSplit(usage.epilog, "\n\n")) {
      AppendWrapped(&out, absl::StrReplaceAll(paragraph, {{"\n", " "}}), 0, 0);
      out.push_back('\n');
    }
    out.pop_back();
  }
  return out;
}

bool PrintHelpIfAsked(const std::vector<std::string>& args, const Usage& usage,
                      absl::string_view source_part) {
  if (!HelpAsked(args)) return false;
  Print(FormatUsage(usage, source_part));
  return true;
}

bool PrintHelpIfAsked(int argc, char** argv, const Usage& usage,
                      const std::vector<Option>& options) {
  if (!HelpAsked(std::vector<std::string>(argv, argv + argc))) return false;
  Print(FormatUsage(usage, options));
  return true;
}

bool PrintHelpIfAsked(int argc, char** argv, const Usage& usage,
                      absl::string_view source_part) {
  return PrintHelpIfAsked(std::vector<std::string>(argv, argv + argc), usage,
                          source_part);
}

std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-' || a[1] != '-') continue;
    const size_t end = std::min(a.find('='), a.size());
    std::replace(a.begin() + 2, a.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
  }
  return args;
}

int ParseOrHelp(int argc, char** argv, const Usage& usage,
                absl::string_view source_part) {
  if (PrintHelpIfAsked(argc, argv, usage, source_part)) return 0;
  absl::SetProgramUsageMessage(absl::StrCat(usage.program, " (see --help)"));
  std::vector<std::string> args = NormalizeFlagNames(argc, argv);
  std::vector<char*> normalized;
  for (std::string& a : args) normalized.push_back(a.data());
  normalized.push_back(nullptr);
  std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(args.size()), normalized.data());
  if (rest.size() > 1) {
    std::fprintf(stderr, "%s: error: unexpected argument '%s' (see --help)\n",
                 usage.program.c_str(), rest[1]);
    return 2;
  }
  return -1;
}

}  // namespace syncline::cli
