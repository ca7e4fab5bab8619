#!/usr/bin/env bash
# Installs the Debian packages ppsim needs to build and test, and nothing when
# they are all present. Non-interactive; needs root (or sudo) only to install.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-graph-dev libboost-program-options-dev
  libeigen3-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format libxml2-utils python3
  clang libclang-rt-dev lld
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
