// `ppsim COMMAND ...`: runs its own commands and, like git, hands any other
// command to the `ppsim-COMMAND` executable beside it.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "schedules/status.h"
#include "sim/cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: ppsim COMMAND [ARGS]...\n"
    "\n"
    "Predicts how a pipeline-parallel training job runs: iteration time, bubbles,\n"
    "throughput and memory per rank, for GPipe, 1F1B, interleaved, zero-bubble,\n"
    "token-level and asynchronous schedules, and checks its predictions on CPUs.\n"
    "\n"
    "commands:\n"
    "  simulate CONFIG   replay training iterations; report time, bubbles, memory\n"
    "  compare CONFIG    the same workload under several schedules, in one table\n"
    "  explore SWEEP     search layouts and schedules under a memory cap, ranked\n"
    "  schedule CONFIG   print (or write/read as CSV) each rank's program\n"
    "  calibrate RUNS... fit a profile's calibration to predicted and measured runs\n"
    "  calibrate --measured CSV  predicted against measured iteration times; with -o,\n"
    "                    fit the hardware's efficiencies and write a preset\n"
    "  calibrate --gemms CSV --hardware PRESET  fit a preset's GEMM fields to timed\n"
    "                    products\n"
    "  calibrate --memory CSV --hardware PRESET  fit a preset's memory fields to timed\n"
    "                    copies\n"
    "  help [COMMAND]    this help, or a command's\n"
    "\n"
    "  profile CONFIG    time this CPU's kernels, write a cost profile (ppsim-profile)\n"
    "  validate CONFIG   predicted against measured on this CPU (ppsim-validate)\n"
    "  run CONFIG        run the schedule for real on this CPU (ppsim-run)\n"
    "  profile-gemms -o CSV  time a sweep of GEMMs on a GPU (ppsim-profile-gemms)\n"
    "  profile-memory -o CSV  time a sweep of copies on a GPU (ppsim-profile-memory)\n"
    "\n"
    "Any other COMMAND runs the executable ppsim-COMMAND next to ppsim.\n"
    "'ppsim COMMAND --help' shows a command's options and examples.\n";

int dispatch_external(const std::string& self, const std::string& command,
                      std::vector<std::string> args) {
  const std::filesystem::path exe =
      std::filesystem::path(self).parent_path() / ("ppsim-" + command);
  if (!std::filesystem::exists(exe)) {
    std::cerr << "ppsim: error: '" << command << "' is not a ppsim command. See 'ppsim --help'.\n";
    return 2;
  }
  std::string name = exe.string();
  std::vector<char*> argv{name.data()};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(name.c_str(), argv.data());
  std::cerr << "ppsim: error: cannot run " << name << ": " << std::strerror(errno) << "\n";
  return 1;
}

std::string self_path(const char* argv0) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : exe.string();
}

}  // namespace

int tool_main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || (command == "help" && args.empty())) {
    std::cout << kUsage;
    return 0;
  }
  if (command == "help") {  // "ppsim help simulate" is "ppsim simulate --help"
    command = args[0];
    args = {"--help"};
  }
  if (command == "--version") {
    std::cout << "ppsim " PPSIM_VERSION "\n";  // CMake's project(VERSION)
    return 0;
  }
  if (command == "simulate") return ppsim::cli::run_simulate(args);
  if (command == "schedule") return ppsim::cli::run_schedule(args);
  if (command == "compare") return ppsim::cli::run_compare(args);
  if (command == "explore") return ppsim::cli::run_explore(args);
  if (command == "calibrate") return ppsim::cli::run_calibrate(args);
  return dispatch_external(self_path(argv[0]), command, std::move(args));
}

int main(int argc, char** argv) {
  return ppsim::guarded_main("ppsim", [&] { return tool_main(argc, argv); });
}
