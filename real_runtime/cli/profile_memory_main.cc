// `ppsim-profile-memory -o MEMORY.csv` (also `ppsim profile-memory ...`):
// times a sweep of device-to-device copies on a GPU
// (profiler/gpu_gemm_sweep.h) and writes them as the CSV `ppsim calibrate
// --memory` fits a preset's hbm_efficiency and kernel_launch_us to.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "profiler/memory_sweep.h"
#ifdef PPSIM_HAVE_CUDA
#include "profiler/cupti_tracer.h"
#include "profiler/gpu_gemm_sweep.h"
#endif
#include "sim/cli/options.h"

namespace po = boost::program_options;

namespace {

const char* const kUsage =
    "usage: ppsim profile-memory -o MEMORY.csv [--device N] [--repetitions N] [--warmup N]\n\n"
    "Times device-to-device copies of 64 KiB to 1 GiB on a CUDA device (a build with CUDA):\n"
    "16 copies back to back between two CUDA events, each size's median of --repetitions\n"
    "such brackets after --warmup untimed ones (profiler/memory_sweep.h). Writes them as the\n"
    "CSV that `ppsim calibrate --memory MEMORY.csv --hardware PRESET` fits the preset's\n"
    "hbm_efficiency and kernel_launch_us to (docs/calibration.md, \"Memory timings\").\n\n"
    "example:\n"
    "  ppsim profile-memory -o memory.csv && ppsim calibrate --memory memory.csv --hardware "
    "h200\n\n";

int tool_main(int argc, char** argv) {
  ppsim::cli::SweepFlags flags;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help");
  ppsim::cli::add_sweep_flags(desc, &flags, "brackets");
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (int code = ppsim::cli::parse_flags(args, desc, kUsage, "ppsim profile-memory --help");
      code >= 0) {
    return code;
  }
  const std::string& output = flags.output;
  if (output.empty()) {
    std::cerr << "ppsim: error: missing -o MEMORY.csv. See 'ppsim profile-memory --help'.\n";
    return 2;
  }
  if (ppsim::Status st = ppsim::cli::check_writable(output); !st) {
    return ppsim::cli::error_exit(st.message());
  }
#ifndef PPSIM_HAVE_CUDA
  return ppsim::cli::error_exit("profile-memory: this ppsim was built without CUDA");
#else
  if (ppsim::Status st = ppsim::gpu::check_device(flags.device); !st) {
    return ppsim::cli::error_exit("profile-memory: " + st.message());
  }
  const std::vector<int64_t> sizes = ppsim::memory_sweep_sizes();
  ppsim::gpu::CopySweepOptions options;
  options.device = flags.device;
  options.repetitions = flags.repetitions;
  options.warmup = flags.warmup;
  const ppsim::Result<std::vector<double> > seconds = ppsim::gpu::time_copy_sweep(
      sizes, options,
      [](const std::string& line) { std::cerr << "profile-memory: " << line << "\n"; });
  if (!seconds) return ppsim::cli::error_exit(seconds.error().message);
  const std::string source = fmt::format(
      "ppsim profile-memory on CUDA device {}, cudaMemcpyAsync device to device, {} back to "
      "back, median of {}",
      flags.device, options.back_to_back, flags.repetitions);
  if (ppsim::Status st =
          ppsim::cli::write_output(output, ppsim::memory_timings_csv(sizes, *seconds, source));
      !st) {
    return ppsim::cli::error_exit(st.message());
  }
  std::cout << fmt::format("{} copies timed, written to {}\n", sizes.size(), output);
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  return ppsim::guarded_main("ppsim-profile-memory", [&] { return tool_main(argc, argv); });
}
