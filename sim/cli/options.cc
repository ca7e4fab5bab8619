#include "sim/cli/options.h"

#include <fstream>
#include <iostream>

namespace po = boost::program_options;

namespace ppsim::cli {

int fail(const std::string& message) {
  // One write: under mpirun, whose own messages share the stream, a line
  // written in pieces can arrive with another message between them.
  std::cerr << ("ppsim: error: " + message + "\n") << std::flush;
  return 1;
}

Status write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return {};
  }
  std::ofstream file(path, std::ios::binary);
  file << text;
  file.close();
  if (!file) return Error{"cannot write " + path};
  return {};
}

int parse_command_line(const std::vector<std::string>& args, const po::options_description& desc,
                       const std::string& command, const std::string& usage, po::variables_map* vm,
                       int positional_max, const std::string& positional_name) {
  po::positional_options_description positional;
  positional.add("config", positional_max);
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), *vm);
    po::notify(*vm);
  } catch (const po::error& e) {
    std::cerr << "ppsim: error: " << e.what() << ". See 'ppsim " << command << " --help'.\n";
    return 2;
  }
  if (vm->count("help")) {
    std::cout << usage << desc;
    return 0;
  }
  if (!vm->count("config")) {
    std::cerr << "ppsim: error: missing the " << positional_name << " argument. See 'ppsim "
              << command << " --help'.\n";
    return 2;
  }
  return -1;
}

}  // namespace ppsim::cli
