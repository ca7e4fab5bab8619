// The `ppsim` tool's own commands. Each takes its arguments after the
// command name and returns the process exit code: 0 success, 1 the input was
// wrong or the work failed (a message on stderr), 2 the command line was wrong.
#pragma once

#include <string>
#include <vector>

namespace ppsim::cli {

int run_simulate(const std::vector<std::string>& args);
int run_schedule(const std::vector<std::string>& args);
int run_compare(const std::vector<std::string>& args);
int run_explore(const std::vector<std::string>& args);
int run_calibrate(const std::vector<std::string>& args);  // calibrate.cc
// `ppsim calibrate --gemms`, which run_calibrate hands on (calibrate_gemms.cc).
int run_calibrate_gemms(const std::vector<std::string>& args);
// `ppsim calibrate --memory`, likewise (calibrate_memory.cc).
int run_calibrate_memory(const std::vector<std::string>& args);

}  // namespace ppsim::cli
