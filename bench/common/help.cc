// help.cc: see help.h.
#include "bench/common/help.h"

#include <cstdio>
#include <cstdlib>

namespace syncline::bench {
namespace {

struct Shared {
  const char* name;
  cli::Option option;
};

// Defaults as in bench_common.h (SizeSchedule) and the programs' Flags.
const std::vector<Shared>& SharedTable() {
  static const auto* table = new std::vector<Shared>{
      {"min_bytes",
       {"--min_bytes=BYTES", "", "Smallest message size (8, 4K, 64M, 1G).", "8"}},
      {"max_bytes", {"--max_bytes=BYTES", "", "Largest message size.", "64M"}},
      {"factor",
       {"--factor=N", "", "Sizes run down from max_bytes, divided by N each time.", "4"}},
      {"warmup",
       {"--warmup=N", "", "Untimed ops per repetition; the first one is checked.", "2"}},
      {"warmup_ms",
       {"--warmup_ms=MS", "",
        "Then untimed ops until every rank has run them for MS milliseconds (0: none).",
        "20"}},
      {"repetitions",
       {"--repetitions=N", "", "Repetitions per row; the row is their median.", "5"}},
      {"json", {"--json=FILE", "", "Also write every row to FILE as JSON.", ""}},
  };
  return *table;
}

}  // namespace

void AppendSharedOptions(const std::vector<std::string>& names,
                         std::vector<cli::Option>* options) {
  for (const std::string& name : names) {
    bool found = false;
    for (const Shared& shared : SharedTable()) {
      if (name != shared.name) continue;
      options->push_back(shared.option);
      found = true;
    }
    if (!found) {
      std::fprintf(stderr, "AppendSharedOptions: no shared option '%s'\n", name.c_str());
      std::abort();
    }
  }
}

}  // namespace syncline::bench
