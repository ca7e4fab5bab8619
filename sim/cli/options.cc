#include "sim/cli/options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

namespace po = boost::program_options;

namespace ppsim::cli {

int error_exit(const std::string& message) {
  // One write: under mpirun, whose own messages share the stream, a line
  // written in pieces can arrive with another message between them.
  std::cerr << ("ppsim: error: " + message + "\n") << std::flush;
  return 1;
}

std::function<void(int)> within(const char* flag, int min, int max) {
  return [flag, min, max](int value) {
    if (value < min || value > max) {
      throw po::error(fmt::format("{} must be from {} to {}, got {}", flag, min, max, value));
    }
  };
}

void add_sweep_flags(po::options_description& desc, SweepFlags* flags, const char* timed) {
  desc.add_options()("output,o", po::value(&flags->output)->value_name("FILE"),
                     "where to write the timings (CSV)")(
      "device", po::value(&flags->device)->value_name("N")->notifier(within("--device", 0, 1023)),
      "the CUDA device (0)")(
      "repetitions",
      po::value(&flags->repetitions)->value_name("N")->notifier(within("--repetitions", 1, 1000)),
      fmt::format("timed {} of each point (10)", timed).c_str())(
      "warmup", po::value(&flags->warmup)->value_name("N")->notifier(within("--warmup", 1, 1000)),
      fmt::format("untimed {} of each point first (3)", timed).c_str());
}

Status check_cores(int ranks, bool force, bool warn) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cores <= 0 || ranks <= cores) return {};  // 0: the count is not known
  if (!force) {
    return Error{fmt::format(
        "{} pipeline ranks on {} cores: the ranks would share cores and every timing would be "
        "meaningless; use --force to run anyway",
        ranks, cores)};
  }
  if (warn)
    std::cerr << "ppsim: warning: more ranks than cores: measured times are not meaningful\n";
  return {};
}

Status check_memory(double bytes, const std::string& what) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return {};  // not known
  const double memory = static_cast<double>(pages) * static_cast<double>(page_bytes);
  if (bytes <= memory) return {};
  return Error{fmt::format("{} take {:.1f} GiB, more than this machine's {:.1f} GiB of memory",
                           what, bytes / (1ull << 30), memory / (1ull << 30))};
}

Status check_writable(const std::string& path) {
  if (path.empty() || path == "-") return {};
  std::filesystem::path file(path);
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    return Error{fmt::format("cannot write {}: is a directory", path)};
  }
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  const bool exists = std::filesystem::exists(file, ec);
  const std::string& target = exists ? path : dir.string();
  if (::access(target.c_str(), W_OK) != 0) {
    return Error{fmt::format("cannot write {}: {}", path, std::strerror(errno))};
  }
  return {};
}

Status check_outputs(std::initializer_list<OutputFlag> outputs) {
  for (const OutputFlag& output : outputs) {
    if (Status st = check_writable(output.path); !st) {
      return Error{fmt::format("{}: {}", output.flag, st.message())};
    }
  }
  return {};
}

Status write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return {};
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return Error{fmt::format("cannot write {}: {}", path, std::strerror(errno))};
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const int error = errno;
  if (std::fclose(file) != 0 || !written) {
    return Error{fmt::format("cannot write {}: {}", path, std::strerror(written ? errno : error))};
  }
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

std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &utc);
  return text;
}

int parse_flags(const std::vector<std::string>& args,
                const boost::program_options::options_description& desc, const std::string& usage,
                const std::string& help_command) {
  namespace po = boost::program_options;
  if (std::any_of(args.begin(), args.end(),
                  [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    std::cout << usage << desc;
    return 0;
  }
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "ppsim: error: " << e.what() << ". See '" << help_command << "'.\n";
    return 2;
  }
  return -1;
}

int require_flags(std::initializer_list<RequiredFlag> flags, const std::string& help_command) {
  for (const RequiredFlag& flag : flags) {
    if (flag.value.empty()) {
      std::cerr << "ppsim: error: " << flag.missing << ". See '" << help_command << "'.\n";
      return 2;
    }
  }
  return -1;
}

}  // namespace ppsim::cli
