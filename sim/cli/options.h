// Command-line parsing shared by every ppsim tool (the `ppsim` commands and
// the ppsim-profile, ppsim-run and ppsim-validate executables): options,
// one positional CONFIG, and the same help and error conventions. Used only
// by the tools' mains.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "schedules/status.h"

namespace ppsim::cli {

// Prints "ppsim: error: MESSAGE" and returns 1, the exit code of bad input.
int error_exit(const std::string& message);

// The most simulation threads --threads may ask for: past the cores of any
// machine, and each thread keeps an engine's buffers.
inline constexpr int kMaxThreads = 1024;

// A notifier for an integer option: a value outside [min, max] is a usage
// error that names the flag and the range.
std::function<void(int)> within(const char* flag, int min, int max);

// The flags of a tool that times a microbenchmark's sweep on a GPU
// (`ppsim profile-gemms`, `profile-memory`): -o FILE, --device N,
// --repetitions N (timed runs of each point, 1-1000) and --warmup N (untimed
// runs first, 1-1000). `timed` says what one run is, for the help.
struct SweepFlags {
  std::string output;
  int device = 0;
  int repetitions = 10;
  int warmup = 3;
};
void add_sweep_flags(boost::program_options::options_description& desc, SweepFlags* flags,
                     const char* timed);

// OK when FILE can be written (its folder, or the file when it exists);
// checked before the work whose results it will hold. "-" and "" are OK.
Status check_writable(const std::string& path);

// A file a command will write and the flag that names it.
struct OutputFlag {
  const char* flag;
  const std::string& path;
};
// The files a command will write, checked before its work: a path that
// cannot be written fails at once ("--json: cannot write out/x.json: ..."),
// not after minutes of work whose results it was to hold.
Status check_outputs(std::initializer_list<OutputFlag> outputs);

// Today's date in UTC, YYYY-MM-DD (for the provenance comments of files a
// fit writes).
std::string utc_date();

// Writes `text` to FILE, or to stdout for "-"; the error says why not.
Status write_output(const std::string& path, const std::string& text);

// The real runtime's tools run one thread or process per pipeline rank:
// more ranks than cores share them and every timing is meaningless. An
// error then, unless `force`; with `force`, a warning on stderr when `warn`
// (the reporting rank).
Status check_cores(int ranks, bool force, bool warn);

// OK when `bytes` (what `what` takes, as "the weights take") fit in this
// machine's physical memory, or when that is not known; past it a process
// would thrash or be killed: an error naming both figures.
Status check_memory(double bytes, const std::string& what);

// Parses a command's arguments (without the program and command names)
// against `desc`, with the positional argument stored as option "config".
// Returns -1 to go on; otherwise the exit code to stop with: 0 after
// printing `usage` and `desc` for --help, 2 after a usage error (which names
// `ppsim COMMAND --help`), including a missing CONFIG.
// A command that takes several positional arguments (`ppsim calibrate
// RUNS...`) passes `positional_max` (-1: any number), stores them in a
// vector option "config", and names them in the missing-argument message by
// `positional_name`.
// Parses a command form that takes flags only, each bound to its variable
// in `desc`. "--help" or "-h" anywhere prints `usage` and `desc` and gives 0
// (looked for first: "--measured --help" would read as a flag missing its
// value); a usage error is printed with "See '<help_command>'." and gives 2;
// -1 to go on.
int parse_flags(const std::vector<std::string>& args,
                const boost::program_options::options_description& desc, const std::string& usage,
                const std::string& help_command);

// A flag the command needs and its message when empty ("--gemms needs a CSV
// file").
struct RequiredFlag {
  const std::string& value;
  const char* missing;
};
// The first empty flag's message with "See '<help_command>'." and 2; -1 when
// every flag has a value.
int require_flags(std::initializer_list<RequiredFlag> flags, const std::string& help_command);

int parse_command_line(const std::vector<std::string>& args,
                       const boost::program_options::options_description& desc,
                       const std::string& command, const std::string& usage,
                       boost::program_options::variables_map* vm, int positional_max = 1,
                       const std::string& positional_name = "CONFIG");

}  // namespace ppsim::cli
