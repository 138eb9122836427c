#!/bin/sh
# Installs what wick needs to build and test on Debian 12 (bookworm). Uses sudo when not root.
set -e
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake make ca-certificates \
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev \
  nettle-dev pkg-config \
  >/dev/null
