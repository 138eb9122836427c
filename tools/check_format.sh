#!/bin/sh
# The repo's formatting (.clang-format, Debian's clang-format-14) over src/, include/ and cli/,
# generated files excluded (src/tokenizer/unicode_tables.cpp, written by
# tools/gen_unicode_tables.py). `tools/check_format.sh` fails naming every file that differs;
# `tools/check_format.sh --fix` rewrites them in place.
set -e
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$CF" >/dev/null 2>&1; then
  echo "check_format: $CF not found; install Debian's clang-format-14 (scripts/setup.sh does)" >&2
  exit 2
fi
files=$(git ls-files 'src/*.cpp' 'src/*.h' 'include/*.h' 'cli/*.cpp' 'cli/*.h' |
        grep -v '^src/tokenizer/unicode_tables\.cpp$')
if [ "$1" = "--fix" ]; then
  echo "$files" | xargs "$CF" -i
  exit 0
fi
bad=""
for f in $files; do
  if ! "$CF" "$f" | cmp -s - "$f"; then bad="$bad $f"; fi
done
if [ -n "$bad" ]; then
  echo "check_format: these files differ from clang-format-14 (run tools/check_format.sh --fix):" >&2
  for f in $bad; do echo "  $f" >&2; done
  exit 1
fi
echo "check_format: $(echo "$files" | wc -l) files formatted"
