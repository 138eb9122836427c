#!/bin/sh
# Writes the English evaluation passage of the tests (tests/tasks/eval_texts.h, kEnglishText) to
# $1/eval.txt: the text the README's perplexity / KL figures of input precision are measured on.
set -e
mkdir -p "$1"
python3 - "$1" <<'PY'
import re, sys
s = open('tests/tasks/eval_texts.h').read()
m = re.search(r'kEnglishText =\n(.*?);\n', s, re.S)
open(sys.argv[1] + '/eval.txt', 'w').write(''.join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))))
PY
