// `ppsim calibrate --memory MEMORY.csv --hardware PRESET`: fits the preset's
// memory parameters to timed memory-bound kernels (sim/fit/memory_fit.h).
#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/fit/gemm_fit.h"
#include "sim/fit/memory_fit.h"

namespace po = boost::program_options;

namespace ppsim::cli {
namespace {

const char* const kUsage =
    "usage: ppsim calibrate --memory MEMORY.csv --hardware PRESET\n\n"
    "MEMORY.csv lists memory-bound kernels timed on one GPU (a sweep of sizes): columns\n"
    "bytes (read and written by one kernel), seconds, and optionally label and source.\n"
    "Fits the hardware preset's hbm_efficiency (the share of hbm_bandwidth_gbps a kernel\n"
    "streams at) and kernel_launch_us (the fixed time of each kernel) to them, by least\n"
    "squares on the relative errors; prints each timing's error with the preset and\n"
    "fitted, and the fitted fields as lines for a preset file. PRESET is a shipped name\n"
    "or a preset file. docs/calibration.md, \"Memory timings\".\n\n"
    "example:\n"
    "  ppsim profile-memory -o memory.csv && ppsim calibrate --memory memory.csv --hardware "
    "h200\n\n";

// -1 to go on, else the exit code.
int parse_memory_args(const std::vector<std::string>& args, std::string* memory,
                      std::string* hardware) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "memory", po::value(memory)->value_name("CSV"),
      "the timed kernels: bytes, seconds[, label, source]")(
      "hardware", po::value(hardware)->value_name("PRESET"),
      "the hardware preset to fit: a shipped name or a preset file");
  if (int code = parse_flags(args, desc, kUsage, "ppsim calibrate --memory --help"); code >= 0) {
    return code;
  }
  return require_flags(
      {{*memory, "--memory needs a CSV file"}, {*hardware, "--hardware needs a preset"}},
      "ppsim calibrate --memory --help");
}

}  // namespace

int run_calibrate_memory(const std::vector<std::string>& args) {
  std::string memory, hardware_name;
  if (int code = parse_memory_args(args, &memory, &hardware_name); code >= 0) return code;
  const Result<MemoryTimings> timings = load_memory_timings(memory);
  if (!timings.ok()) return error_exit(timings.error().message);
  const Result<HardwareSpec> hardware = load_hardware_preset(hardware_name);
  if (!hardware.ok()) return error_exit(hardware.error().message);
  const Result<MemoryFitResult> fit = fit_memory_timings(*hardware, *timings);
  if (!fit.ok()) return error_exit(fit.error().message);
  std::cout << format_memory_fit(*timings, *hardware, *fit, hardware_name, utc_date());
  return 0;
}

}  // namespace ppsim::cli
