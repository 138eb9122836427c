#!/bin/sh
# Installs what wick needs to build and test on Debian 12 (bookworm). Uses sudo when not root.
#   C++: the compiler, CMake, nlohmann-json, CLI11, fmt, GoogleTest/Benchmark, nettle (SHA-256),
#        Boost.Beast/Asio 1.81 and prometheus-cpp (wick serve), hiredis 0.14 (the replicas'
#        Redis tier).
#   Python package (python/, tests/python): pybind11 2.10, the Python 3.11 headers, numpy,
#        pytest, setuptools and venv (the offline `pip install ./python`).
#   Format check (tools/check_format.sh): clang-format 14.
#   Sanitizer and fuzz build (CI, tests/fuzz): clang 14 with its runtimes (ASan, UBSan,
#        libFuzzer) and llvm-14's symbolizer.
#   Replicas: redis-server 7.0 and nginx 1.22 (deploy/, tests/replicas, tests/server/replicas).
#   Tests of wick serve: Node.js >= 20 with npm (the machine's, or Debian's nodejs/npm when none
#        is on PATH), the npm packages pinned in tests/server/package-lock.json (openai@6,
#        playwright-core) and Debian's chromium for the chat-page test.
set -e
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake make ca-certificates \
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev \
  nettle-dev pkg-config libboost1.81-dev prometheus-cpp-dev chromium \
  libhiredis-dev redis-server nginx \
  pybind11-dev python3-dev python3-numpy python3-pytest python3-setuptools python3-venv \
  clang-14 libclang-rt-14-dev llvm-14 clang-format-14 \
  >/dev/null
# The replica tests start their own Redis and nginx on free loopback ports: the packages' own
# services are not needed (a container without an init system never starts them; elsewhere they
# are stopped so nothing listens beyond loopback).
for svc in nginx redis-server; do
  if command -v service >/dev/null 2>&1 && service "$svc" status >/dev/null 2>&1; then
    $SUDO service "$svc" stop >/dev/null 2>&1 || true
  fi
done
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
# The pinned test clients (no scripts run, nothing written outside tests/server/node_modules).
(cd "$(dirname "$0")/../tests/server" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
