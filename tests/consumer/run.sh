#!/bin/sh
# Installs a wick build and builds a project against it (README "Library"; ctest install_consumer).
#   tests/consumer/run.sh BUILD_DIR
# BUILD_DIR is a complete plain build (cmake --build BUILD_DIR done; not a sanitizer build). The
# script installs it into a temporary prefix P (cmake --install BUILD_DIR --prefix P), checks what
# was installed (the public headers and nothing else, <wick/wick.h> including every one of them,
# each header compiling on its own, libwick, the CMake package, the `wick` program), configures tests/consumer/ with
# CMAKE_PREFIX_PATH=P and the build's C++ compiler, checks that it found wick in P (not in the
# source tree), builds it and runs it (tests/consumer/main.cpp: load the embedded model, generate,
# save a state file, ...), then has the installed `wick` continue that state file and compares the
# text with the program's. Exit status 0 when everything passed; the temporary folder is removed,
# or kept and named on failure.
set -u
export LC_ALL=C  # ls and sort in one order
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -eq 1 ] || { sed -n "2,12p" "$0"; exit 2; }
build=$(cd "$1" && pwd) || exit 2
[ -f "$build/CMakeCache.txt" ] || { echo "install_consumer: $build is not a CMake build folder"; exit 2; }
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/wick-consumer.XXXXXX") || exit 2
prefix="$tmp/prefix"

fail() {
  echo "install_consumer: FAILED: $*"
  echo "install_consumer: kept $tmp"
  exit 1
}
# Runs a command with its output in $tmp/LOG; on failure prints the output and fails.
step() {
  log=$1
  shift
  "$@" > "$tmp/$log" 2>&1 || { cat "$tmp/$log"; fail "$*"; }
}

step install.log cmake --install "$build" --prefix "$prefix"

# What was installed: exactly the headers of include/wick/ and the umbrella header generated from
# them (wick.h, including all of them), the library, the package files and the program.
(cd "$root/include/wick" && ls && echo wick.h) | LC_ALL=C sort > "$tmp/headers.src"
(cd "$prefix/include/wick" && ls | LC_ALL=C sort) > "$tmp/headers.installed" || fail "no $prefix/include/wick"
cmp -s "$tmp/headers.src" "$tmp/headers.installed" ||
  fail "installed headers differ from include/wick/: $(diff "$tmp/headers.src" "$tmp/headers.installed" | tr '\n' ' ')"
[ "$(ls "$prefix/include")" = wick ] || fail "$prefix/include holds more than wick/: $(ls "$prefix/include")"
grep -v '^wick\.h$' "$tmp/headers.src" | sed 's|.*|#include "wick/&"|' > "$tmp/umbrella.expected"
grep '^#include "wick/' "$prefix/include/wick/wick.h" | LC_ALL=C sort > "$tmp/umbrella.found"
cmp -s "$tmp/umbrella.expected" "$tmp/umbrella.found" ||
  fail "wick/wick.h does not include every public header: $(diff "$tmp/umbrella.expected" "$tmp/umbrella.found" | tr '\n' ' ')"
# Each installed header compiles on its own (README "Library"), with the prefix's headers only.
for h in $(cat "$tmp/headers.installed"); do
  printf '#include <wick/%s>\n' "$h" > "$tmp/alone.cpp"
  "$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" "$tmp/alone.cpp" > "$tmp/alone.log" 2>&1 ||
    { cat "$tmp/alone.log"; fail "<wick/$h> does not compile on its own"; }
done
lib=$(ls "$prefix"/lib*/libwick.a 2>/dev/null | head -n 1)
[ -n "$lib" ] || fail "no libwick.a under $prefix/lib*"
pkg=$(dirname "$lib")/cmake/wick
for f in wickConfig.cmake wickConfigVersion.cmake wickTargets.cmake; do
  [ -f "$pkg/$f" ] || fail "no $pkg/$f"
done
[ -x "$prefix/bin/wick" ] || fail "no $prefix/bin/wick"
step version.log "$prefix/bin/wick" --version

# The consumer project, against the prefix only (no package registry).
step configure.log cmake -S "$here" -B "$tmp/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
found=$(sed -n 's/^wick_DIR:[A-Z]*=//p' "$tmp/consumer/CMakeCache.txt")
[ "$found" = "$pkg" ] || fail "the consumer found wick in '$found', not in $pkg"
grep -q -- "$prefix/include" "$tmp/consumer/compile_commands.json" ||
  fail "the consumer is not compiled with $prefix/include"
! grep -q -- "$root/include" "$tmp/consumer/compile_commands.json" ||
  fail "the consumer is compiled with the source tree's headers ($root/include)"
step build.log cmake --build "$tmp/consumer"
"$tmp/consumer/wick_consumer" "$tmp/state.safetensors" > "$tmp/consumer.out" 2> "$tmp/consumer.err" ||
  { cat "$tmp/consumer.err"; fail "wick_consumer"; }
[ -s "$tmp/consumer.out" ] || fail "wick_consumer printed no text"

# The installed program continues the state file the consumer saved, greedily as the consumer
# did: the same text.
"$prefix/bin/wick" generate --load-state "$tmp/state.safetensors" --prompt "" --max-tokens 8 -q \
  > "$tmp/cli.out" 2> "$tmp/cli.err" || { cat "$tmp/cli.err"; fail "wick generate --load-state"; }
[ ! -s "$tmp/cli.err" ] || { cat "$tmp/cli.err"; fail "wick generate --load-state wrote to stderr"; }
cmp -s "$tmp/consumer.out" "$tmp/cli.out" ||
  fail "wick generate --load-state printed '$(cat "$tmp/cli.out")', the consumer '$(cat "$tmp/consumer.out")'"

echo "install_consumer: ok (installed $(cat "$tmp/version.log"), consumer printed '$(cat "$tmp/consumer.out")')"
rm -rf "$tmp"
