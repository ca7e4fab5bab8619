#!/usr/bin/env bash
# Makes what scripts/gpu_check.sh needs on a GPU machine that has the NVIDIA
# driver and the CUDA toolkit but neither the network nor the Debian
# packages ppsim links (yaml-cpp, fmt, Boost, OpenMPI): a build for one GPU
# architecture, and a small folder with its executables in bin/ and those
# shared libraries in lib/, to copy there and run as
#
#   PPSIM_GPU_CHECK_BUILD=OUT scripts/gpu_check.sh
#
#   scripts/gpu_bundle.sh [OUT [ARCH]]   (default out/gpu-bundle, sm_90: an H100/H200)
#
# The C library, libstdc++ and the CUDA toolkit's libraries (cuBLAS, CUPTI,
# NCCL, found through the binaries' rpath) are the GPU machine's own.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/gpu-bundle}
arch=${2:-90}
build=$root/build-gpu-bundle
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$build" Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DPPSIM_BUILD_BENCH=OFF
if [ ! -x "$build/bin/ppsim_gpu_tests" ]; then
  echo "gpu_bundle: the build found no CUDA toolkit with CUPTI: nothing GPU-side was built" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
tools="ppsim ppsim-profile ppsim-profile-gemms ppsim-profile-memory ppsim-run ppsim-validate ppsim_gpu_tests ppsim_gpu_host_tests
  ppsim_unit_tests"
[ -x "$build/bin/ppsim_cuda_mpi_tests" ] && tools="$tools ppsim_cuda_mpi_tests"
for t in $tools; do cp "$build/bin/$t" "$out/bin/"; done
# Every library the tools load from the system's folders, but the C and C++
# runtimes every Linux has.
for t in $tools; do ldd "$out/bin/$t"; done | awk '$3 ~ /^\/(usr\/)?lib/ {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libutil|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
echo "gpu bundle for sm_$arch in $out ($(du -sh "$out" | cut -f1)):"
ls "$out/bin" "$out/lib" | sed 's/^/  /'
