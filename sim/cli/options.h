// Command-line parsing shared by every ppsim tool (the `ppsim` commands and
// the ppsim-profile, ppsim-run and ppsim-validate executables): options,
// one positional CONFIG, and the same help and error conventions. Used only
// by the tools' mains.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "schedules/status.h"

namespace ppsim::cli {

// Parses a command's arguments (without the program and command names)
// against `desc`, with the positional argument stored as option "config".
// Returns -1 to go on; otherwise the exit code to stop with: 0 after
// printing `usage` and `desc` for --help, 2 after a usage error (which names
// `ppsim COMMAND --help`), including a missing CONFIG.
// Prints "ppsim: error: MESSAGE" and returns 1, the exit code of bad input.
int fail(const std::string& message);

// Writes `text` to FILE, or to stdout for "-".
Status write_output(const std::string& path, const std::string& text);

// A command that takes several positional arguments (`ppsim calibrate
// RUNS...`) passes `positional_max` (-1: any number), stores them in a
// vector option "config", and names them in the missing-argument message by
// `positional_name`.
int parse_command_line(const std::vector<std::string>& args,
                       const boost::program_options::options_description& desc,
                       const std::string& command, const std::string& usage,
                       boost::program_options::variables_map* vm, int positional_max = 1,
                       const std::string& positional_name = "CONFIG");

}  // namespace ppsim::cli
