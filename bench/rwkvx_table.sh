#!/bin/sh
# RWKV-X decode-time curve (README "RWKV-X speed"): the synthetic 0.2B hybrid (12 RWKV + 4
# attention blocks, C 768, bf16), decode ms/token after 0, 1k, 8k and 32k tokens of context in
# `full` and `moba` (B 2048, K 3) attention, prefill of 512 tokens, and INT8 weights.
# One JSON object per test on stdout. Usage: bench/rwkvx_table.sh [BUILD_DIR] (default build).
set -eu
build=${1:-build}
model=/tmp/synth-x0.2b.safetensors
[ -f "$model" ] || "$build/wick" synth --geometry rwkvx-0.2b --dtype bf16 --seed 1 --out "$model" >&2
for mode in full moba; do
  "$build/wick" bench --model "$model" --attention "$mode" --prompt 512 --gen 16 --reps 3 \
    --depth 0,1024,8192,32768 --json
done
"$build/wick" bench --model "$model" --quantize int8 --prompt 512 --gen 16 --reps 3 --depth 0,8192 --json
