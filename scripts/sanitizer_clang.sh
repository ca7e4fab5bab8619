#!/usr/bin/env bash
# Prints the clang++ that builds the sanitized builds (libFuzzer harnesses
# with AddressSanitizer and UndefinedBehaviorSanitizer; ThreadSanitizer):
# FUZZ_CXX when set, else the newest clang++ installed. Exits 2, saying what
# to install, when there is none: Debian ships the sanitizer runtimes and
# libFuzzer in libclang-rt-N-dev, a recommendation of clang-N that
# scripts/setup.sh installs by name (clang, libclang-rt-dev: version 14 on
# Debian 12). Used by scripts/fuzz.sh, scripts/tsan.sh and .ci/run's
# sanitizer build.
set -euo pipefail
cxx=${FUZZ_CXX:-}
if [ -z "$cxx" ]; then
  for v in 19 18 17 16 15 14 ''; do
    command -v "clang++${v:+-$v}" >/dev/null && { cxx=clang++${v:+-$v}; break; }
  done
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' >"$probe/p.cc"
if [ -z "$cxx" ] || ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" 2>/dev/null; then
  echo "fuzz: needs clang with libFuzzer: apt-get install clang libclang-rt-dev" >&2
  exit 2
fi
command -v "$cxx"
