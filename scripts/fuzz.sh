#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, docs/fuzzing.md) with clang in
# build-fuzz and runs each for SECONDS (default 30) on a seed corpus that it
# assembles there from configs/, tests/data/, tests/cli/ and the docs'
# examples. Prints one line per harness; exits 1 when any harness found a
# crash (its input is saved under build-fuzz/fuzz/artifacts/HARNESS/).
#
#   scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]
#
# HARNESS: config, override, schedule_csv, cost_profile, runs_file, measured_runs, gemm_timings,
# memory_timings, simulate (all by
# default). Environment: JOBS (build jobs and harnesses run at once,
# default nproc); FUZZ_BUILD (the
# build directory, default build-fuzz); FUZZ_RUNS=N (N inputs from a fixed
# seed, at most SECONDS each, instead of SECONDS; simulate, whose inputs are
# each priced and replayed, N / 5); FUZZ_KEEP_GOING=1 (fork mode: keep
# fuzzing after a crash, timeout or out-of-memory and save each of them);
# FUZZ_CXX (the compiler, scripts/sanitizer_clang.sh); FUZZ_PREBUILT=1 (no
# build: run the harnesses FUZZ_BUILD already has).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"  # the libraries ppsim builds with
seconds=${1:-30}
[ $# -gt 0 ] && shift
harnesses=("$@")
# The longest first, so that two at a time end together (with FUZZ_RUNS=10000,
# .ci/run's, on the 2-core machine: config 41 s, runs_file 27, simulate 20,
# override 14, schedule_csv 10, cost_profile and measured_runs 9; in the
# order simulate, config, ... the phase took 80 s, in this one about 66).
[ ${#harnesses[@]} -eq 0 ] && harnesses=(config runs_file simulate override schedule_csv cost_profile
                                          measured_runs gemm_timings memory_timings)
build=${FUZZ_BUILD:-$root/build-fuzz}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# Largest input per harness, a little above its largest seed.
declare -A max_len=([config]=8192 [override]=1024 [schedule_csv]=8192 [cost_profile]=8192
                    [runs_file]=8192 [measured_runs]=32768 [gemm_timings]=4096 [memory_timings]=4096
                    [simulate]=8192)
for h in "${harnesses[@]}"; do
  [ -n "${max_len[$h]:-}" ] || { echo "fuzz: unknown harness '$h'" >&2; exit 2; }
done

cxx=$("$root/scripts/sanitizer_clang.sh")  # FUZZ_CXX to choose

# ---- Build: the harnesses and the libraries they link, nothing else;
# FUZZ_PREBUILT=1: those of FUZZ_BUILD as they are (.ci/run builds them in
# its sanitizer build).
if [ "${FUZZ_PREBUILT:-0}" != 1 ]; then
  # A cache made with another compiler would be thrown away noisily: do it quietly.
  if [ -f "$build/CMakeCache.txt" ] &&
     ! grep -qx "CMAKE_CXX_COMPILER:[A-Z]*=$cxx" "$build/CMakeCache.txt"; then
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DPPSIM_FUZZ=ON -DPPSIM_BUILD_TESTS=OFF -DPPSIM_BUILD_BENCH=OFF -DPPSIM_CUDA=OFF \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld >/dev/null
  cmake --build "$build" -j "$jobs" --target ppsim_fuzz
fi
for h in "${harnesses[@]}"; do
  [ -x "$build/bin/${h}_fuzz" ] || { echo "fuzz: no $build/bin/${h}_fuzz" >&2; exit 2; }
done

# ---- Seeds: rebuilt on every run under fuzz/seeds; what the fuzzer finds
# accumulates in fuzz/corpus and is kept between runs.
out=$build/fuzz
seeds=$out/seeds
rm -rf "$seeds"
for h in config override schedule_csv cost_profile runs_file measured_runs gemm_timings memory_timings \
  simulate; do
  mkdir -p "$seeds/$h" "$out/corpus/$h" "$out/artifacts/$h" "$out/logs"
done
# Copies files into a seed folder, named after their path so none collide.
add_files() {
  local dir=$1 file
  shift
  for file in "$@"; do
    [ -f "$file" ] && cp "$file" "$dir/$(realpath --relative-to="$root" "$file" | tr / _)"
  done
  return 0
}
# Writes one seed from text, named after its hash.
add_text() {
  printf '%s' "$2" >"$1/$(printf '%s' "$2" | sha1sum | cut -c1-16)"
}
data_files() {  # the files of the seed folders with this extension
  find "$root/configs" "$root/tests/data" "$root/tests/cli" -type f -name "*.$1" 2>/dev/null
}
mapfile -t files < <(data_files yaml)
add_files "$seeds/config" "${files[@]}"
add_files "$seeds/simulate" "${files[@]}"
mapfile -t files < <(data_files csv)
add_files "$seeds/schedule_csv" "${files[@]}"
mapfile -t files < <(find "$root/configs/published" -name measured.csv)
add_files "$seeds/measured_runs" "${files[@]}"
mapfile -t files < <(find "$root/configs/microbench" -name '*.csv')
add_files "$seeds/gemm_timings" "${files[@]}"
# What `ppsim profile-memory` writes (profiler/memory_sweep.h).
add_text "$seeds/memory_timings" "$(printf 'bytes,seconds,label,source\n131072,2.5e-06,copy 64 KiB,"H200, ""copies"""\n2147483648,7.4e-04,copy 1048576 KiB,"H200, ""copies"""\n')"
mapfile -t files < <(data_files json)
add_files "$seeds/runs_file" "${files[@]}"
# Profiles in tests/data, and the example in docs/cost_profile.md.
mapfile -t files < <(grep -rlsx 'version: [0-9]*' "$root/tests/data" || true)
add_files "$seeds/cost_profile" "${files[@]}"
awk '/^```yaml/ {on = 1; next} /^```/ {if (on) exit} on' "$root/docs/cost_profile.md" \
  >"$seeds/cost_profile/docs_cost_profile.yaml"
# The --set flags quoted in the docs and the CLI tests: each alone, and all
# of them as one input (one flag a line).
mapfile -t flags < <(grep -rhoE -- '--set[ =][^ `"]+' "$root/README.md" "$root/docs" \
  "$root/tests/cli" | sed -E 's/^--set[ =]//' | sort -u)
for flag in "${flags[@]}"; do add_text "$seeds/override" "$flag"; done
add_text "$seeds/override" "$(printf '%s\n' "${flags[@]}")"
# Schedules of every generator, profiles and runs files, from the writers.
"$build/bin/fuzz_seeds" "$seeds"

# ---- Run each harness.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Stack traces with file:line: clang-N's runtime looks for llvm-N's symbolizer,
# which clang-N does not pull in; any llvm-symbolizer reads its output.
cxx_name=$(basename "$cxx")
for s in "llvm-symbolizer-${cxx_name#clang++-}" llvm-symbolizer; do
  [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && command -v "$s" >/dev/null &&
    export ASAN_SYMBOLIZER_PATH=$(command -v "$s")
done
keep_going=()
[ "${FUZZ_KEEP_GOING:-0}" = 1 ] &&
  keep_going=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
# FUZZ_RUNS=N: N inputs from a fixed seed instead of a time, the same inputs
# on every machine (what .ci/run uses: a regression test, not a search).
# The simulate harness takes a fifth of them: each of its inputs is priced
# and replayed, about 15 times a reader's time.
declare -A runs_divisor=([simulate]=5)
# Runs harness $1 and writes its one-line report to $out/logs/$1.result.
fuzz_one() {
  local h=$1 log=$out/logs/$1.log before status=0 runs speed corpus new stuck how
  local repeatable=()
  [ -n "${FUZZ_RUNS:-}" ] && repeatable=(-runs=$((FUZZ_RUNS / ${runs_divisor[$h]:-1})) -seed=1)
  rm -f "$out/logs/$h.result"
  before=$(ls "$out/artifacts/$h" | wc -l)
  # A hang can deadlock libFuzzer's own timeout report (the alarm may land
  # inside the allocator): a wall-clock limit ends the run whatever happens.
  timeout -k 10 $((seconds + 120)) "$build/bin/${h}_fuzz" "$out/corpus/$h" "$seeds/$h" \
    "${keep_going[@]}" "${repeatable[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="${max_len[$h]}" \
    -artifact_prefix="$out/artifacts/$h/" -print_final_stats=1 >"$log" 2>&1 || status=$?
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  speed=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
  if [ -z "$runs" ]; then  # fork mode prints no final stats: its last status line
    # ("#746844: cov: 5185 ... exec/s 1238 ...", no colon after exec/s)
    runs=$({ grep -oE '^#[0-9]+' "$log" || true; } | tail -1 | tr -d '#')
    speed=$({ grep -oE 'exec/s:? [0-9]+' "$log" || true; } | tail -1 | grep -oE '[0-9]+$' || true)
  fi
  corpus=$(ls "$out/corpus/$h" | wc -l)
  new=$(($(ls "$out/artifacts/$h" | wc -l) - before))
  if [ "$status" -ne 0 ] || [ "$new" -gt 0 ]; then
    stuck=""
    [ "$status" -eq 124 ] || [ "$status" -eq 137 ] && stuck=", stuck past its time and killed"
    echo "$h: FOUND $new new input(s) in $out/artifacts/$h/ (exit $status$stuck); log: $log"
  else
    how="in $seconds s"
    [ -n "${FUZZ_RUNS:-}" ] && how="from seed 1"
    echo "$h: ok: ${runs:-?} runs $how, ${speed:-?} exec/s, corpus $corpus inputs"
  fi >"$out/logs/$h.result"
}
# The harnesses side by side, JOBS at a time; their reports in order.
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$h" &
done
wait
found=0
for h in "${harnesses[@]}"; do
  if [ -f "$out/logs/$h.result" ]; then
    cat "$out/logs/$h.result"
    grep -q "^$h: ok:" "$out/logs/$h.result" || found=1
  else
    echo "$h: no report (the run itself failed); log: $out/logs/$h.log"
    found=1
  fi
done
exit $found
