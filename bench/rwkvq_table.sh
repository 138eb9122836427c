#!/bin/sh
# The .rwkvq speed table of README.md: synthetic 0.1B / 1.5B checkpoints, dense bf16 vs the plain
# quantised files, all in one run (the machine is shared: compare only numbers of one run).
# Each model is benchmarked cold (page cache dropped; needs root, skipped otherwise) and then
# loaded once more from the cache. Then the packed files at --precision int8 (their products in
# integers: decode and prefill) and its cost, KL(fp32 || int8 inputs) on the English passage of
# bench/eval_text.sh (wick kl --json records). Writes JSON lines to stdout. Needs ~8 GB in $DIR.
set -e
W=${W:-build/wick}
DIR=${DIR:-/tmp}
GEOMETRIES=${GEOMETRIES:-"0.1b 1.5b"}  # e.g. GEOMETRIES=0.1b for the small rows only
for g in $GEOMETRIES; do
  [ -f $DIR/synth-$g.safetensors ] || $W synth --geometry $g --dtype bf16 --out $DIR/synth-$g.safetensors >&2
  for l in sym:8 sb6:5 sb6:4; do
    f=$DIR/synth-$g-$(echo $l | tr -d ':').rwkvq
    [ -f $f ] || $W quantize $DIR/synth-$g.safetensors $f --plain --layout $l >&2
  done
done
run() {  # model prompt gen reps
  sync
  echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "not root: load times are not cold" >&2
  $W bench --model $1 --prompt $2 --gen $3 --reps $4 --json
  $W bench --model $1 --prompt 0 --gen 4 --reps 1 --json | sed 's/"test":"tg4"/"test":"cached-load"/'
}
for g in $GEOMETRIES; do
  if [ $g = 0.1b ]; then gen=128; reps=5; else gen=32; reps=3; fi
  for m in $DIR/synth-$g.safetensors $DIR/synth-$g-sym8.rwkvq $DIR/synth-$g-sb65.rwkvq $DIR/synth-$g-sb64.rwkvq; do
    run $m 512 $gen $reps
  done
done
sh bench/eval_text.sh $DIR/wick-precision
for g in $GEOMETRIES; do
  if [ $g = 0.1b ]; then gen=128; reps=5; else gen=32; reps=3; fi
  for m in $DIR/synth-$g-sym8.rwkvq $DIR/synth-$g-sb65.rwkvq $DIR/synth-$g-sb64.rwkvq; do
    $W bench --model $m --precision int8 --prompt 512 --gen $gen --reps $reps --json
    $W kl --reference $m --model $m --precision int8 --text $DIR/wick-precision/eval.txt --ctx 128 --json
  done
done
