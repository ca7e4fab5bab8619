// `ppsim calibrate --gemms GEMMS.csv --hardware PRESET`: fits the preset's
// GEMM parameters to timed matrix products (sim/fit/gemm_fit.h).
#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/fit/gemm_fit.h"

namespace po = boost::program_options;

namespace ppsim::cli {
namespace {

const char* const kUsage =
    "usage: ppsim calibrate --gemms GEMMS.csv --hardware PRESET [--dtype bf16|fp16|fp32]\n\n"
    "GEMMS.csv lists matrix products timed alone on one GPU (a microbenchmark's sweep of\n"
    "shapes): columns m, n, k, seconds, and optionally batch, label and source. Fits the\n"
    "hardware preset's GEMM parameters (max_gemm_efficiency, gemm_tile_k_overhead,\n"
    "gemm_half_tile_efficiency) to them, each that the timings see (the others keep the\n"
    "preset's values), by least squares on the relative errors over a refined grid;\n"
    "prints each timing's error with the preset and fitted, and the fitted fields as\n"
    "lines for a preset file. PRESET is a shipped name or a preset file.\n"
    "docs/calibration.md, \"GEMM timings\".\n\n"
    "example:\n"
    "  ppsim calibrate --gemms configs/microbench/h800-gemm-k-sweep.csv --hardware h100-sxm\n\n";

struct GemmArgs {
  std::string gemms;
  std::string hardware;
  std::string dtype = "bf16";
};

// -1 to go on, else the exit code.
int parse_gemm_args(const std::vector<std::string>& args, GemmArgs* out) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "gemms", po::value(&out->gemms)->value_name("CSV"),
      "the timed products: m, n, k, seconds[, batch, label, source]")(
      "hardware", po::value(&out->hardware)->value_name("PRESET"),
      "the hardware preset to fit: a shipped name or a preset file")(
      "dtype", po::value(&out->dtype)->value_name("TYPE"),
      "the products' operands and result: bf16 (default), fp16 or fp32");
  if (int code = parse_flags(args, desc, kUsage, "ppsim calibrate --gemms --help"); code >= 0) {
    return code;
  }
  return require_flags(
      {{out->gemms, "--gemms needs a CSV file"}, {out->hardware, "--hardware needs a preset"}},
      "ppsim calibrate --gemms --help");
}

}  // namespace

int run_calibrate_gemms(const std::vector<std::string>& args) {
  GemmArgs parsed;
  if (int code = parse_gemm_args(args, &parsed); code >= 0) return code;
  std::optional<DType> dtype;
  for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32}) {
    if (parsed.dtype == to_string(d)) dtype = d;
  }
  if (!dtype) {
    std::cerr << "ppsim: error: --dtype: expected bf16, fp16 or fp32, got \"" << parsed.dtype
              << "\". See 'ppsim calibrate --gemms --help'.\n";
    return 2;
  }
  const Result<GemmTimings> timings = load_gemm_timings(parsed.gemms);
  if (!timings.ok()) return error_exit(timings.error().message);
  const Result<HardwareSpec> hardware = load_hardware_preset(parsed.hardware);
  if (!hardware.ok()) return error_exit(hardware.error().message);
  const Result<GemmFitResult> fit = fit_gemm_timings(*hardware, *dtype, *timings);
  if (!fit.ok()) return error_exit(fit.error().message);
  std::cout << format_gemm_fit(*timings, *fit, parsed.hardware, utc_date());
  return 0;
}

}  // namespace ppsim::cli
