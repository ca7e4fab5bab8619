// `ppsim-profile-gemms -o GEMMS.csv` (also `ppsim profile-gemms ...`): times
// a sweep of cuBLAS products on a GPU (profiler/gpu_gemm_sweep.h) and writes
// them as the CSV `ppsim calibrate --gemms` fits a preset's GEMM fields to.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "profiler/gemm_sweep.h"
#ifdef PPSIM_HAVE_CUDA
#include "profiler/cupti_tracer.h"
#include "profiler/gpu_gemm_sweep.h"
#endif
#include "sim/cli/options.h"

namespace po = boost::program_options;

namespace {

const char* const kUsage =
    "usage: ppsim profile-gemms -o GEMMS.csv [--dtype bf16|fp16] [--device N] [--repetitions N] "
    "[--warmup N]\n\n"
    "Times a sweep of matrix products on a CUDA device (a build with CUDA): cuBLAS's default\n"
    "algorithm, operands and result of --dtype, fp32 accumulation, each shape's median of\n"
    "--repetitions runs timed by CUDA events after --warmup untimed ones. The shapes vary K at\n"
    "M = N = 8192, the height at N = K = 4096, and the width at M = K = 8192\n"
    "(profiler/gemm_sweep.h). Writes them as the CSV that `ppsim calibrate --gemms GEMMS.csv\n"
    "--hardware PRESET` fits the preset's GEMM fields to (docs/calibration.md, \"GEMM\n"
    "timings\").\n\n"
    "example:\n"
    "  ppsim profile-gemms -o gemms.csv && ppsim calibrate --gemms gemms.csv --hardware h200\n\n";

int tool_main(int argc, char** argv) {
  ppsim::cli::SweepFlags flags;
  std::string dtype = "bf16";
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")("dtype", po::value(&dtype)->value_name("TYPE"),
                                                 "operands and result: bf16 (default) or fp16");
  ppsim::cli::add_sweep_flags(desc, &flags, "runs");
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (int code = ppsim::cli::parse_flags(args, desc, kUsage, "ppsim profile-gemms --help");
      code >= 0) {
    return code;
  }
  const std::string& output = flags.output;
  if (output.empty()) {
    std::cerr << "ppsim: error: missing -o GEMMS.csv. See 'ppsim profile-gemms --help'.\n";
    return 2;
  }
  if (dtype != "bf16" && dtype != "fp16") {
    std::cerr << "ppsim: error: --dtype: expected bf16 or fp16, got \"" << dtype
              << "\". See 'ppsim profile-gemms --help'.\n";
    return 2;
  }
  if (ppsim::Status st = ppsim::cli::check_writable(output); !st) {
    return ppsim::cli::error_exit(st.message());
  }
#ifndef PPSIM_HAVE_CUDA
  return ppsim::cli::error_exit("profile-gemms: this ppsim was built without CUDA");
#else
  if (ppsim::Status st = ppsim::gpu::check_device(flags.device); !st) {
    return ppsim::cli::error_exit("profile-gemms: " + st.message());
  }
  const std::vector<ppsim::GemmShape> shapes = ppsim::gemm_sweep_shapes();
  ppsim::gpu::GemmSweepOptions options;
  options.device = flags.device;
  options.type = dtype == "bf16" ? ppsim::DType::kBf16 : ppsim::DType::kFp16;
  options.repetitions = flags.repetitions;
  options.warmup = flags.warmup;
  const ppsim::Result<std::vector<double> > seconds = ppsim::gpu::time_gemm_sweep(
      shapes, options,
      [](const std::string& line) { std::cerr << "profile-gemms: " << line << "\n"; });
  if (!seconds) return ppsim::cli::error_exit(seconds.error().message);
  const std::string source = fmt::format(
      "ppsim profile-gemms on CUDA device {}, {}, cuBLAS default algorithm, median of {}",
      flags.device, dtype, flags.repetitions);
  if (ppsim::Status st =
          ppsim::cli::write_output(output, ppsim::gemm_timings_csv(shapes, *seconds, source));
      !st) {
    return ppsim::cli::error_exit(st.message());
  }
  std::cout << fmt::format("{} products timed, written to {}\n", shapes.size(), output);
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  return ppsim::guarded_main("ppsim-profile-gemms", [&] { return tool_main(argc, argv); });
}
