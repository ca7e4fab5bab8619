#!/usr/bin/env bash
# The one prepared GPU check: on a machine with an NVIDIA GPU, builds ppsim
# with CUDA for this GPU, runs the GPU tests (which must run, not skip),
# profiles a GPT-style layer on the GPU, validates three schedules (1F1B,
# interleaved, ZB-H1) on the GPU with the CUDA runtime backend, calibrates
# the profile on those runs (each held out in turn), times a sweep of GEMMs
# and fits the h200 preset's GEMM fields to it, with two GPUs or more
# and mpirun does the same with a GPU per rank over NCCL, and prints one
# summary
# with the table of predicted, measured and error. Everything it writes goes
# to one folder: out/gpu_check/<UTC time>/ (or $1).
#
#   scripts/gpu_check.sh [OUT_DIR]
#
# PPSIM_GPU_CHECK_BUILD=DIR uses a build already made there (with CUDA, for
# this GPU) instead of installing and building: for a GPU machine without
# the toolchain or the network. Shared libraries the binaries need that such
# a machine lacks (yaml-cpp, fmt, Boost, OpenMPI) can travel in DIR/lib;
# scripts/gpu_bundle.sh makes such a DIR (bin/ and lib/, a few tens of MiB).
#
# Exit code: 0 when every step passed, 1 when a step failed, 2 when there
# is no usable GPU. Meant to finish in a few minutes on one H200.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/gpu_check/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
build=${PPSIM_GPU_CHECK_BUILD:-$root/build-gpu-check}
# The hardware presets of this checkout, wherever the binaries were built.
export PPSIM_HARDWARE_DIR=$root/configs/hardware
summary=$out/summary.txt
: >"$summary"
status=0

say() { echo "$*" | tee -a "$summary"; }
step() {  # step NAME LOG COMMAND...: runs, records pass/fail and the time
  local name=$1 log=$out/$2
  shift 2
  local start=$SECONDS
  printf '%s\t%s\t' "$name" "$(date +%s.%N)" >>"$out/steps.tsv"
  if "$@" >"$log" 2>&1; then
    printf '%s\n' "$(date +%s.%N)" >>"$out/steps.tsv"
    say "$(printf '%-28s passed  %4ds  %s' "$name" $((SECONDS - start)) "$log")"
    return 0
  fi
  printf '%s\n' "$(date +%s.%N)" >>"$out/steps.tsv"
  say "$(printf '%-28s FAILED  %4ds  %s' "$name" $((SECONDS - start)) "$log")"
  tail -n 20 "$log" | sed 's/^/    /' | tee -a "$summary"
  status=1
  return 1
}

say "ppsim GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >"$out/devices.txt" 2>&1; then
  say "no usable NVIDIA GPU here (nvidia-smi: $(head -n 1 "$out/devices.txt" 2>/dev/null || echo missing))"
  exit 2
fi
sed 's/^/device: /' "$out/devices.txt" | tee -a "$summary"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv >>"$out/devices.txt" 2>&1

# The first GPU's SM clock, power and temperature four times a second while
# the steps run (clocks.csv: epoch seconds first), summarised per step at
# the end: whether a sustained run (validate) holds the clock the isolated
# kernels of the profile had (docs/validation.md, "On a GPU").
reasons=clocks_event_reasons.active
nvidia-smi --query-gpu=$reasons --format=csv,noheader >/dev/null 2>&1 || reasons=clocks_throttle_reasons.active
nvidia-smi -i 0 --query-gpu=clocks.sm,power.draw,temperature.gpu,$reasons \
  --format=csv,noheader,nounits -lms 250 2>/dev/null |
  while IFS= read -r sample; do printf '%s, %s\n' "$(date +%s.%N)" "$sample"; done >"$out/clocks.csv" &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT

# This GPU's architecture only: a build for every architecture takes longer
# and checks nothing more here.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
arch=${arch:-90}
if [ -n "${PPSIM_GPU_CHECK_BUILD:-}" ]; then
  say "using the build in $build (PPSIM_GPU_CHECK_BUILD)"
  [ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  step "setup" setup.log "$root/scripts/setup.sh" || exit 1
  step "build (CUDA sm_$arch)" build.log \
    "$root/scripts/build.sh" "$build" Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DPPSIM_BUILD_BENCH=OFF || {
    say "result: FAILED"
    exit 1
  }
fi
if [ ! -x "$build/bin/ppsim_gpu_tests" ]; then
  say "the build found no CUDA toolkit with CUPTI: nothing GPU-side was built"
  exit 1
fi

# GPU tests: on a GPU none may skip (a skip here means the device was not
# usable; with every test skipped the program exits 77 and the step fails).
if step "GPU tests" gpu_tests.log "$build/bin/ppsim_gpu_tests" --gtest_brief=0; then
  if grep -q "SKIPPED" "$out/gpu_tests.log"; then
    say "GPU tests skipped on a GPU machine:"
    grep -A1 "Skipped" "$out/gpu_tests.log" | head -n 6 | sed 's/^/    /' | tee -a "$summary"
    status=1
  fi
fi
# The device's dropout draw rate (tests/gpu/dropout_rate_test.cc), the A100
# preset's dropout_rng_gsamples_per_s in question (docs/validation.md).
grep '^dropout draws:' "$out/gpu_tests.log" | sed 's/^/    /' | tee -a "$summary"
# The host side of the GPU parts (CUPTI records, layouts, profiler options:
# ppsim_gpu_host_tests; GPU activity, device spans, links and receivers:
# ppsim_unit_tests); the rest of the unit tests is CI's.
step "GPU host tests" host_tests.log "$build/bin/ppsim_gpu_host_tests" --gtest_brief=1
step "GPU host tests (unit)" host_unit_tests.log "$build/bin/ppsim_unit_tests" --gtest_brief=1 \
  --gtest_filter='GpuActivity*:DeviceSpans*:DirectedLinks*:InOrderReceiver*'

# A GPT-3 175B layer at t = 8 (the per-GPU shard's MLP, full-width
# attention: profiler/README.md) and the GPU's copy links.
if step "profile a GPT-3 layer" profile.log "$build/bin/ppsim-profile" \
  "$root/configs/examples/gpt3-175b-64gpu.yaml" --device cuda -o "$out/gpt3-175b.profile.yaml"; then
  tail -n 16 "$out/profile.log" | sed 's/^/    /' | tee -a "$summary"
fi

# Predicted against measured on this GPU: four pipeline ranks sharing it,
# each on a quarter of its SMs (configs/validate/gpu-h200.yaml), profiled
# there first; then the calibration fitted to those runs, each run's error
# after calibration measured with that run held out of the fit.
if step "validate on the GPU" validate.log "$build/bin/ppsim-validate" \
  "$root/configs/validate/gpu-h200.yaml" --backend cuda --schedules 1f1b,interleaved-1f1b:2,zb-h1 \
  --json "$out/validate.json" --runs-out "$out/runs.json" --trace "$out/validate-trace.json"; then
  say ""
  grep -A4 '^schedule ' "$out/validate.log" | sed 's/^/    /' | tee -a "$summary"
  grep -E '^ppsim: warning|^run: ' "$out/validate.log" | sed 's/^/    /' | tee -a "$summary"
  if step "calibrate (held out)" calibrate.log "$build/bin/ppsim" calibrate "$out/runs.json" \
    -o "$out/calibrated.profile.yaml" --json "$out/calibration.json"; then
    sed 's/^/    /' "$out/calibrate.log" | tee -a "$summary"
  fi
fi

# The GPU's GEMMs alone: a sweep of cuBLAS products (depth, height and width;
# profiler/gemm_sweep.h), and the h200 preset's GEMM fields fitted to it
# (`ppsim calibrate --gemms`, docs/calibration.md "GEMM timings"): issue
# 12's measurement of the GEMM efficiency by shape.
if step "GEMM sweep" gemm_sweep.log "$build/bin/ppsim-profile-gemms" -o "$out/gemms.csv"; then
  if step "fit the GEMM fields" gemm_fit.log "$build/bin/ppsim" calibrate --gemms \
    "$out/gemms.csv" --hardware h200; then
    sed 's/^/    /' "$out/gemm_fit.log" | tee -a "$summary"
  fi
fi

# The GPU's memory-bound kernels alone: copies of 64 KiB to 1 GiB
# (profiler/memory_sweep.h), and the h200 preset's hbm_efficiency and
# kernel_launch_us fitted to them (`ppsim calibrate --memory`,
# docs/calibration.md "Memory timings"): whether the presets' fitted 0.51
# is the GPU's streaming rate or stands for costs the model lacks.
if step "copy sweep" memory_sweep.log "$build/bin/ppsim-profile-memory" -o "$out/memory.csv"; then
  if step "fit the memory fields" memory_fit.log "$build/bin/ppsim" calibrate --memory \
    "$out/memory.csv" --hardware h200; then
    sed 's/^/    /' "$out/memory_fit.log" | tee -a "$summary"
  fi
fi

# Several GPUs: one process per GPU, NCCL between them (real_runtime/cuda_mpi.h):
# its tests on two GPUs (none may skip), then the validation config's model
# on up to four GPUs, a whole GPU per rank: rank 0 profiles a whole GPU and
# the NCCL link, the three schedules are predicted with it and run, and the
# calibration is checked held out on those runs too.
gpus=$(grep -c '^GPU ' "$out/devices.txt")
mpi_run=(mpirun)
[ "$(id -u)" -eq 0 ] && mpi_run+=(--allow-run-as-root)
if [ "$gpus" -lt 2 ]; then
  say "several GPUs (NCCL): left out, this machine has $gpus GPU"
elif ! command -v mpirun >/dev/null || [ ! -x "$build/bin/ppsim_cuda_mpi_tests" ]; then
  say "several GPUs (NCCL): left out, $(command -v mpirun >/dev/null && echo "the build has no NCCL backend" || echo "no mpirun here")"
else
  if step "NCCL tests (2 GPUs)" nccl_tests.log "${mpi_run[@]}" -np 2 "$build/bin/ppsim_cuda_mpi_tests"; then
    if grep -q "SKIPPED" "$out/nccl_tests.log"; then
      say "NCCL tests skipped on a machine with $gpus GPUs:"
      grep -A1 "Skipped" "$out/nccl_tests.log" | head -n 6 | sed 's/^/    /' | tee -a "$summary"
      status=1
    fi
  fi
  ranks=$((gpus >= 4 ? 4 : 2))
  if step "validate over NCCL ($ranks GPUs)" nccl_validate.log "${mpi_run[@]}" -np "$ranks" \
    "$build/bin/ppsim-validate" "$root/configs/validate/gpu-h200.yaml" --backend cuda \
    --schedules 1f1b,interleaved-1f1b:2,zb-h1 --set parallel.pipeline="$ranks" \
    --set hardware.gpus_per_node="$ranks" --set hardware.memory_gib=141 \
    --set hardware.peak_tflops_bf16=989 --set hardware.peak_tflops_fp16=989 \
    --json "$out/nccl-validate.json" --runs-out "$out/nccl-runs.json" \
    --trace "$out/nccl-validate-trace.json"; then
    say ""
    grep -A4 '^schedule ' "$out/nccl_validate.log" | sed 's/^/    /' | tee -a "$summary"
    grep -E '^ppsim: warning|^run: ' "$out/nccl_validate.log" | sed 's/^/    /' | tee -a "$summary"
    if step "calibrate over NCCL (held out)" nccl_calibrate.log "$build/bin/ppsim" calibrate \
      "$out/nccl-runs.json" -o "$out/nccl-calibrated.profile.yaml"; then
      sed 's/^/    /' "$out/nccl_calibrate.log" | tee -a "$summary"
    fi
  fi
fi

kill "$sampler" 2>/dev/null
say ""
say "SM clock (MHz) and power (W) of GPU 0 during each step (clocks.csv):"
"$root/scripts/gpu_clocks.awk" "$out/steps.tsv" "$out/clocks.csv" | sed 's/^/    /' | tee -a "$summary"

say ""
say "targets (issue 6): median error on iteration time at most 5 %; at most 3 % after"
say "calibration (held out)."
say ""
if [ "$status" -eq 0 ]; then say "result: passed"; else say "result: FAILED"; fi
say "logs and results: $out"
exit "$status"
