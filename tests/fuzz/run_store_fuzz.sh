#!/usr/bin/env bash
# Builds the store-protocol fuzz target with clang's libFuzzer (+ASan/UBSan)
# and runs it for a bounded time on the corpus kept in the repo.
# Usage: run_store_fuzz.sh <source root> <work dir> [seconds]
set -euo pipefail
src=$1
work=$2
seconds=${3:-60}
mkdir -p "$work/corpus"
cp -n "$src/tests/fuzz/corpus/store_protocol/"* "$work/corpus/" 2>/dev/null || true
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src/core/include" -I"$src/core/src" \
  "$src/tests/fuzz/store_protocol_fuzz.cc" "$src/core/src/tcp_store_session.cc" \
  "$src/core/src/tcp_store_protocol.cc" \
  -labsl_strings -labsl_str_format_internal -labsl_strings_internal -labsl_throw_delegate \
  -labsl_raw_logging_internal -labsl_int128 \
  -o "$work/store_protocol_fuzz"
"$work/store_protocol_fuzz" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=1024 \
  -print_final_stats=1 "$work/corpus"
