#!/bin/sh
# Checks the AVX-512 VNNI INT8 kernel on a CPU without AVX-512: compiles
# src/kernels/int8_matmul_avx512.cpp with this folder's <immintrin.h> (SIMDe's portable
# intrinsics; `apt-get install libsimde-dev`) and runs check_int8.cc against a scalar sum.
# Usage: tests/kernels/avx512_emulated/run.sh   (from anywhere; builds in a temporary folder)
set -e
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
if [ ! -f /usr/include/simde/x86/avx512.h ]; then
  echo "SIMDe is not installed (apt-get install libsimde-dev)" >&2
  exit 1
fi
g++ -std=c++20 -O1 -I"$here" -I"$root/src" -I"$root/include" -Wno-psabi \
  "$root/src/kernels/int8_matmul_avx512.cpp" "$here/check_int8.cc" -o "$out/check_int8"
"$out/check_int8"
