#!/usr/bin/env bash
# Encode throughput, wick's BPE vs HuggingFace tokenizers (npm `tokenizers`, Rust core via N-API),
# single thread, on the same >= 10 MiB corpus (shared/fixtures/tokenizers/corpus.jsonl texts joined
# with "\n" and repeated), in one run. Prints MB/s (10^6 input bytes per second) for both.
#
#   bench/run_bpe_compare.sh [build dir, default build] [seconds per case, default 2]
#
# The npm package is installed on first use into $WICK_BPE_REF_DIR (default /tmp/wick-bpe-ref,
# outside the repository): `npm install tokenizers@0.23.2`, the version the fixtures were made with.
# Needs node >= 18 and npm; the package ships its prebuilt linux-x64 binary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-$root/build}"
secs="${2:-2}"
fixtures="${WICK_FIXTURES:-$root/../shared/fixtures}"
ref="${WICK_BPE_REF_DIR:-/tmp/wick-bpe-ref}"

if [ ! -x "$build/bench/bench_bpe" ]; then
  echo "building bench_bpe in $build" >&2
  cmake -S "$root" -B "$build" >/dev/null
  cmake --build "$build" --target bench_bpe -j"$(nproc)" >/dev/null
fi
if [ ! -f "$ref/node_modules/tokenizers/package.json" ]; then
  echo "installing npm tokenizers@0.23.2 into $ref" >&2
  mkdir -p "$ref"
  (cd "$ref" && { [ -f package.json ] || npm init -y >/dev/null; } &&
     npm install --no-audit --no-fund tokenizers@0.23.2 >/dev/null)
fi

export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1
echo "== wick BpeTokenizer ($(cd "$build" && pwd)/bench/bench_bpe)"
WICK_FIXTURES="$fixtures" "$build/bench/bench_bpe" \
  --benchmark_filter='BM_BpeEncode' --benchmark_min_time="$secs" \
  --benchmark_format=json 2>/dev/null |
  node -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      for (const b of JSON.parse(s).benchmarks) {
        const bytes = b.input_MB * 1e6, unit = { ms: 1e3, us: 1e6, ns: 1e9, s: 1 }[b.time_unit];
        console.log(`wick ${b.name.split("/min_time")[0]}: ` +
          `${(bytes / 1e6 / (b.real_time / unit)).toFixed(2)} MB/s wall, ` +
          `${(bytes / 1e6 / (b.cpu_time / unit)).toFixed(2)} MB/s CPU`);
      }
    });'
echo "== npm tokenizers $(node -p "require('$ref/node_modules/tokenizers/package.json').version")"
node "$here/bpe_reference.mjs" "$ref" "$fixtures" "$secs"
