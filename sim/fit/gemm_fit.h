// GEMM timings: matrix products timed alone on one GPU (a microbenchmark's
// sweep of shapes), which `ppsim calibrate --gemms` fits the hardware
// model's GEMM parameters to, so that a preset's GEMM figures come from a
// measurement by a command anyone can rerun (docs/calibration.md, "GEMM
// timings").
//
//   m,n,k,seconds,label,source
//   8192,8192,256,8.9056e-05,K 256,tilelang benchmark/matmul README (H800)
//
// Columns, in any order: `m`, `n`, `k` (the product of an m x k and a k x n
// matrix; each a whole number from 1 to 2^31) and `seconds` (its measured
// time, > 0) are required; `batch` (independent products of that shape, a
// whole number from 1 to 2^31, default 1), `label` and `source` are
// optional. Every error names file:line.
//
// The model is the cost model's (sim/cost/op_time.h): the product's tiles
// in waves over the SMs, each costing K + gemm_tile_k_overhead steps at
// max_gemm_efficiency of the peak, cuBLAS's half-height tile where it wins
// at gemm_half_tile_efficiency of that, and at least the time to move the
// operands and the result. The fit minimises the sum of the squared
// relative errors over a grid refined around its best point (the tiles'
// waves make the model a staircase, where derivatives mislead), for each
// parameter that the rows see; the others keep the preset's value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedules/status.h"
#include "sim/core/workload.h"
#include "sim/fit/measured_runs.h"

namespace ppsim {

struct GemmTiming {
  int line = 0;  // where its record starts in the CSV, for messages
  double batch = 1;
  double m = 0, n = 0, k = 0;
  double seconds = 0;
  std::string label;  // as given, else "M x N x K"
  std::string source;

  double flops() const { return 2 * batch * m * n * k; }
};

struct GemmTimings {
  std::string path;  // the CSV, as given
  std::vector<GemmTiming> rows;
};

// Reads the CSV text; `path` names it in messages. Errors: no header, an
// unknown, repeated or missing column, a record with more or fewer fields
// than the header, a field that is not a number in its range, no rows.
Result<GemmTimings> parse_gemm_timings(std::string_view text, const std::string& path);
Result<GemmTimings> load_gemm_timings(const std::string& path);

// The hardware of a preset name or file (as `hardware.preset` takes them;
// a path relative to the working directory). Errors: the config loader's.
Result<HardwareSpec> load_hardware_preset(const std::string& preset);

// The cost model's time for a row's product, operands and result of
// `dtype`.
double gemm_model_seconds(const HardwareSpec& hardware, DType dtype, const GemmTiming& row);

// A fitted HardwareSpec field and the values it may take.
struct GemmFitParameter {
  const char* name;
  double HardwareSpec::*member;
  double lower;
  double upper;
};

inline constexpr GemmFitParameter kGemmFitParameters[] = {
    {"max_gemm_efficiency", &HardwareSpec::max_gemm_efficiency, 0.3, 1.0},
    {"gemm_tile_k_overhead", &HardwareSpec::gemm_tile_k_overhead, 0.0, 512.0},
    // 0: the whole tile only.
    {"gemm_half_tile_efficiency", &HardwareSpec::gemm_half_tile_efficiency, 0.0, 1.0},
};

// A parameter the rows do not see is left alone: a tenth of its range, up
// and down from the preset's value (inward at a bound), moves no row's
// model time by more than this fraction.
inline constexpr double kGemmMinRowChange = 1e-3;

struct GemmParameterResult {
  const GemmFitParameter* parameter = nullptr;
  double preset = 0;
  double value = 0;
  bool fitted = false;
  double largest_row_change = 0;  // of the probes above, relative
  // Seen by the rows, but not determined beside the other parameters: a
  // tenth of its range either way, the others fitted again, moves no row by
  // more than kGemmMinRowChange (the last listed such keeps the preset's
  // value, and the rest are fitted again without it).
  bool beside_others = false;
};

struct GemmFitResult {
  HardwareSpec hardware;                        // the preset's, with the fitted parameters' values
  std::vector<GemmParameterResult> parameters;  // in kGemmFitParameters' order
  std::vector<double> before;                   // each row's relative error, preset
  std::vector<double> after;                    // and fitted
  ErrorSummary before_summary, after_summary;
};

// Errors: no rows.
Result<GemmFitResult> fit_gemm_timings(const HardwareSpec& preset, DType dtype,
                                       const GemmTimings& timings);

// The report: each parameter (preset, fitted, status), each row (shape,
// measured time and TFLOP/s, error before and after), the summaries, and
// the fitted fields as YAML lines for a preset file (`path`: the CSV, for
// their comments).
std::string format_gemm_fit(const GemmTimings& timings, const GemmFitResult& fit,
                            std::string_view preset, std::string_view date);

}  // namespace ppsim
