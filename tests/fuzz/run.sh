#!/bin/sh
# Runs wick's libFuzzer targets (README "Reliability").
#   tests/fuzz/run.sh TARGET SECONDS [BUILD_DIR]   one target for SECONDS
#   tests/fuzz/run.sh all SECONDS [BUILD_DIR]      every target, SECONDS each, one after another
# BUILD_DIR (default build-fuzz) is a clang build configured with -DWICK_FUZZ=ON:
#   CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DWICK_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
#     -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DWICK_BUILD_BENCH=OFF && cmake --build build-fuzz -j
# Each run starts from the committed seeds (tests/fuzz/corpus/TARGET) and the inputs earlier runs
# found (BUILD_DIR/fuzz-work/TARGET, not committed); a crash, a leak, a timeout (10 s per input)
# or an allocation above 2 GiB stops it and leaves the input in BUILD_DIR/fuzz-work/crashes/
# (keep it as tests/fuzz/regressions/TARGET/<name> once fixed: the test suite replays those).
# Prints per target: executions, executions per second, the coverage reached; with
# WICK_FUZZ_LOG=FILE also appends "date machine target seconds-run executions" to FILE (the project's
# campaign log is tests/fuzz/campaign.tsv). Exit status: 0 when every target ran clean, 1
# otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 2 ] || { sed -n "2,16p" "$0"; exit 2; }
what=$1
seconds=$2
build=$(cd "${3:-$root/build-fuzz}" && pwd) || exit 2
work="$build/fuzz-work"
# Symbolised stack traces in reports (Debian's llvm-14).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
mkdir -p "$work/crashes"
if [ "$what" = all ]; then
  targets=$(cd "$here/corpus" && ls -d */ | tr -d /)
else
  targets=$what
fi
status=0
for t in $targets; do
  bin="$build/tests/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "no fuzzer $bin (configure with -DWICK_FUZZ=ON and build)"; exit 2; }
  mkdir -p "$work/$t"
  log="$work/$t.log"
  started=$(date +%s)
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/crashes/$t-" "$work/$t" "$here/corpus/$t" \
    >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - started ))  # a crash ends the run early
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if [ -n "${WICK_FUZZ_LOG:-}" ]; then  # the campaign log (tests/fuzz/campaign.tsv)
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
    printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%d)" "$cpu" "$t" "$elapsed" "${runs:-0}" \
      >> "$WICK_FUZZ_LOG"
  fi
  if [ $rc -eq 0 ]; then
    echo "fuzz $t: ${seconds} s, ${runs:-?} executions (${speed:-?}/s), ${cov:-cov: ?}, clean"
  else
    status=1
    echo "fuzz $t: FAILED (exit $rc) after ${elapsed} s, ${runs:-?} executions; log $log, input in $work/crashes/"
    grep -m 5 -E 'ERROR|CONTRACT VIOLATION|SUMMARY' "$log" || tail -20 "$log"
  fi
done
exit $status
