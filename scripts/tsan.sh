#!/usr/bin/env bash
# Builds the threaded runtime's tests (ppsim_runtime_tests: the threads
# backend, mailboxes, transfer workers, the abortable barrier) with
# ThreadSanitizer in build-tsan and runs them REPEAT times over (default
# 20): a data race or a lock-order inversion in any run fails it.
#
#   scripts/tsan.sh [REPEAT]
#
# Linked by LLVM's lld (scripts/setup.sh installs it), several times faster
# than GNU ld on sanitized binaries.
# Environment: JOBS (build jobs, default nproc); TSAN_BUILD (the build
# directory, default build-tsan); FUZZ_CXX (the compiler,
# scripts/sanitizer_clang.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
repeat=${1:-20}
build=${TSAN_BUILD:-$root/build-tsan}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
cxx=$("$root/scripts/sanitizer_clang.sh")
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DPPSIM_TSAN=ON -DPPSIM_CUDA=OFF -DPPSIM_BUILD_BENCH=OFF -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
  -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST >/dev/null
cmake --build "$build" -j "$jobs" --target ppsim_runtime_tests
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
  "$build/bin/ppsim_runtime_tests" --gtest_repeat="$repeat" --gtest_brief=1
