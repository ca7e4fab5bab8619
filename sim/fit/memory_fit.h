// Memory timings: memory-bound kernels timed on one GPU, each moving a
// known number of bytes (a microbenchmark's sweep of sizes), which `ppsim
// calibrate --memory` fits the hardware model's memory parameters to: the
// share of the datasheet's HBM bandwidth a streaming kernel reaches
// (hbm_efficiency) and the fixed time each kernel costs beside it
// (kernel_launch_us: the gap between two kernels of a stream, the kernel's
// ramp and tail). docs/calibration.md, "Memory timings".
//
//   bytes,seconds,label,source
//   2147483648,0.00081,copy 1 GiB,ppsim profile-memory on CUDA device 0
//
// Columns, in any order: `bytes` (what one kernel reads and writes, a whole
// number from 1 to 2^50) and `seconds` (its measured time, > 0) are
// required; `label` and `source` are optional. Every error names file:line.
//
// The model is the cost model's for a memory-bound kernel (sim/cost/op_time.h):
// bytes / (hbm_bandwidth_gbps x hbm_efficiency) + kernel_launch_us. Linear in
// its two unknowns, so the fit is the weighted linear least squares of the
// relative errors, in closed form, each parameter held to its config range.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedules/status.h"
#include "sim/core/workload.h"
#include "sim/fit/measured_runs.h"

namespace ppsim {

struct MemoryTiming {
  int line = 0;  // where its record starts in the CSV, for messages
  double bytes = 0;
  double seconds = 0;
  std::string label;  // as given, else the bytes in MiB
  std::string source;
};

struct MemoryTimings {
  std::string path;  // the CSV, as given
  std::vector<MemoryTiming> rows;
};

// Reads the CSV text; `path` names it in messages. Errors: no header, an
// unknown, repeated or missing column, a record with more or fewer fields
// than the header, a field that is not a number in its range, no rows.
Result<MemoryTimings> parse_memory_timings(std::string_view text, const std::string& path);
Result<MemoryTimings> load_memory_timings(const std::string& path);

// The cost model's time for a kernel moving `bytes`.
double memory_model_seconds(const HardwareSpec& hardware, double bytes);

// The ranges the fit keeps to: hbm_efficiency's config range above 0
// (0.05, as no GPU streams slower), kernel_launch_us's from 0 to that of
// `ppsim calibrate --measured`'s fit.
inline constexpr double kMinFittedHbmEfficiency = 0.05;
inline constexpr double kMaxFittedKernelUs = 50;

struct MemoryFitResult {
  HardwareSpec hardware;  // the preset's, with the fitted values
  // The fixed time needs two sizes: with one, the efficiency alone is
  // fitted and kernel_launch_us keeps the preset's value.
  bool fixed_time_fitted = false;
  std::vector<double> before;  // each row's relative error, preset
  std::vector<double> after;   // and fitted
  ErrorSummary before_summary, after_summary;
};

// Errors: no rows, a preset without an HBM bandwidth.
Result<MemoryFitResult> fit_memory_timings(const HardwareSpec& preset,
                                           const MemoryTimings& timings);

// The report: the two parameters (preset and fitted), each row (bytes,
// measured time and GB/s, error before and after), the summaries, and the
// fitted fields as YAML lines for a preset file.
std::string format_memory_fit(const MemoryTimings& timings, const HardwareSpec& preset,
                              const MemoryFitResult& fit, std::string_view preset_name,
                              std::string_view date);

}  // namespace ppsim
