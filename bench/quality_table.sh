#!/bin/sh
# The quantisation quality table of README.md: size, ppl and KL vs dense for dense / reduction /
# compression / plain sym:8 / plain sb6:4 / --quantize int8, on the trained tiny model
# (byte-level) and on a synthetic 0.1B model (KL only: its weights are random). Texts:
# tests/tasks/eval_texts.h (evaluation) and a different calibration text for the activation
# statistics.
set -e
W=${W:-build/wick}
DIR=${DIR:-/tmp/wick-quality}
mkdir -p $DIR
python3 - "$DIR" <<'PY'
import re, sys
d = sys.argv[1]
s = open('tests/tasks/eval_texts.h').read()
def grab(name):
    m = re.search(name + r' =\n(.*?);\n', s, re.S)
    return ''.join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
open(d + '/eval.txt', 'w').write(grab('kEnglishText'))
open(d + '/calib.txt', 'w').write(grab('kOtherText') + "\n" + open('README.md').read()[:6000])
PY
table() {  # name dense ctx
  name=$1; M=$2; ctx=$3
  $W act-stats --model $M --text $DIR/calib.txt --ctx $ctx --out $DIR/$name-stats.safetensors >&2
  for p in reduction compression; do
    $W quantize $M $DIR/$name-$p.rwkvq --preset $p --act-stats $DIR/$name-stats.safetensors >&2
  done
  $W quantize $M $DIR/$name-sym8.rwkvq --plain --layout sym:8 >&2
  $W quantize $M $DIR/$name-sb64.rwkvq --plain --layout sb6:4 >&2
  echo "== $name dense $(stat -c %s $M) bytes"
  $W ppl --model $M --text $DIR/eval.txt --ctx 128 --json
  for q in reduction compression sym8 sb64; do
    echo "== $name $q $(stat -c %s $DIR/$name-$q.rwkvq) bytes"
    $W ppl --model $DIR/$name-$q.rwkvq --text $DIR/eval.txt --ctx 128 --json
    $W kl --reference $M --model $DIR/$name-$q.rwkvq --text $DIR/eval.txt --ctx 128 --json
  done
  # INT8 at load (--quantize int8): no file, weight bytes as held in memory.
  echo "== $name int8 (--quantize int8) $($W info --model $M --quantize int8 --json | grep '"weight_bytes"') "
  $W ppl --model $M --quantize int8 --text $DIR/eval.txt --ctx 128 --json
  $W kl --reference $M --model $M --quantize int8 --text $DIR/eval.txt --ctx 128 --json
}
table tiny models/tiny-rwkv7-834K.safetensors 128
[ -f $DIR/synth-0.1b.safetensors ] || $W synth --geometry 0.1b --dtype bf16 --out $DIR/synth-0.1b.safetensors >&2
table synth-0.1b $DIR/synth-0.1b.safetensors 256
