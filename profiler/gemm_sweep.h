// The sweep of matrix products `ppsim profile-gemms` times on a GPU
// (gpu_gemm_sweep.h), and the CSV it writes for `ppsim calibrate --gemms`
// (sim/fit/gemm_fit.h), which fits a hardware preset's GEMM fields to it.
// Host code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ppsim {

// C (m x n) = A (m x k) B (k x n).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

// Shapes that tell the fitted parameters apart: K from 256 to 16,384 at
// M = N = 8192 (the tile's overhead against its main loop's efficiency),
// heights 1024 to 16,384 at N = K = 4096 (the waves of whole and
// half-height tiles), and the narrow products of tensor parallelism (N 512
// to 2048 at M = K = 8192). At most 2^27 elements an operand or result.
std::vector<GemmShape> gemm_sweep_shapes();

// The CSV `ppsim calibrate --gemms` reads: m, n, k, seconds, label, source,
// a row per shape (`seconds[i]` for `shapes[i]`), `source` on every row.
// REQUIRES: as many seconds as shapes.
std::string gemm_timings_csv(const std::vector<GemmShape>& shapes,
                             const std::vector<double>& seconds, std::string_view source);

}  // namespace ppsim
