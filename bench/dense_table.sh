#!/bin/sh
# The dense performance table of README.md ("Dense speed"): synthetic checkpoints of the 0.1B
# (L 12, C 768) and 1.5B (L 24, C 2048) geometry with bf16 / fp16 / fp32 weights, prefill of 512
# tokens and decode, 2 threads, all in one run (the machine is shared: compare only numbers of
# one run). Each decode figure comes with the read bandwidth measured in the same `wick bench`
# call and the roofline fraction, each prefill figure with the fp32 FMA peak measured in the same
# call and the fraction of it the matrix products reach (src/bench's probes, README "Dense
# speed"). The table's first line names the CPU. Then the cost of --precision bf16: perplexity and KL against
# fp32 on the trained tiny model (tests/tasks/eval_texts.h) and KL on the synthetic 0.1B.
# At --precision bf16 on a CPU with AVX-512 BF16 the prefill limit is the BF16 dot peak (the
# kernel there is vdpbf16ps), so that row names it instead of the FMA peak.
# JSON lines go to $DIR/dense.jsonl, the markdown table to stdout. Needs ~11 GB in $DIR
# (GEOMETRIES="0.1b" for the small model alone: ~1.3 GB).
set -e
W=${W:-build/wick}
DIR=${DIR:-/tmp}
T=${THREADS:-2}
GEOMETRIES=${GEOMETRIES:-0.1b 1.5b}
for g in $GEOMETRIES; do
  for d in bf16 fp16 fp32; do
    f=$DIR/synth-$g-$d.safetensors
    [ -f $f ] || $W synth --geometry $g --dtype $d --seed 1 --out $f >&2
  done
done
out=$DIR/dense.jsonl
: > $out
for g in $GEOMETRIES; do
  if [ $g = 0.1b ]; then gen=64; reps=5; else gen=16; reps=3; fi
  for d in bf16 fp16 fp32; do
    $W bench --model $DIR/synth-$g-$d.safetensors --threads $T --prompt 512 --gen $gen --reps $reps --json >> $out
  done
  $W bench --model $DIR/synth-$g-bf16.safetensors --threads $T --prompt 512 --gen 0 --reps $reps --precision bf16 --json >> $out
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"CPU: {cpu}, {rows[0]['threads']} threads, kernels {rows[0]['isa']}, probes {rows[0].get('probe_isa', '?')}\n")
print("| model | weights | inputs | file MiB | prefill 512 tok/s | prefill limit GFLOP/s | prefill fraction of limit | decode ms/token | decode tok/s | bandwidth GB/s | roofline ms | fraction |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
by = {}
for r in rows:
    key = (r["model"], r["precision"])
    by.setdefault(key, {})[r["test"][:2]] = r
for (m, p), t in by.items():
    g = "0.1B" if "0.1b" in m else "1.5B"
    pp, tg = t.get("pp"), t.get("tg")
    any_ = pp or tg
    cells = [g, any_["weight_format"], p, f'{any_["size_bytes"] / 2**20:.0f}',
             f'{pp["tokens_per_s"]:.1f} ± {pp["stddev"]:.1f}' if pp else "-"]
    if pp and "bf16_dot_peak_gflop_s" in pp:
        cells += [f'{pp["bf16_dot_peak_gflop_s"]:.0f} (BF16 dot)', f'{100 * pp["bf16_dot_peak_fraction"]:.0f} %']
    elif pp:
        cells += [f'{pp["fma_peak_gflop_s"]:.0f} (fp32 FMA)', f'{100 * pp["fma_peak_fraction"]:.0f} %']
    else:
        cells += ["-"] * 2
    if tg:
        cells += [f'{tg["ms_per_token"]:.1f}', f'{tg["tokens_per_s"]:.1f}', f'{tg["bandwidth_gb_s"]:.1f}',
                  f'{tg["roofline_ms_per_token"]:.1f}', f'{100 * tg["roofline_fraction"]:.0f} %']
    else:
        cells += ["-"] * 5
    print("| " + " | ".join(cells) + " |")
PY
# The cost of --precision bf16.
sh bench/eval_text.sh $DIR/wick-precision
E=$DIR/wick-precision/eval.txt
for p in fp32 bf16; do
  echo "== tiny ppl --precision $p"
  $W ppl --model models/tiny-rwkv7-834K.safetensors --text $E --ctx 128 --precision $p --json
done
echo "== tiny kl bf16 vs fp32"
$W kl --reference models/tiny-rwkv7-834K.safetensors --model models/tiny-rwkv7-834K.safetensors --precision bf16 --text $E --ctx 128 --json
echo "== synth 0.1B (bf16 weights) kl bf16 vs fp32"
$W kl --reference $DIR/synth-0.1b-bf16.safetensors --model $DIR/synth-0.1b-bf16.safetensors --precision bf16 --text $E --ctx 128 --json
