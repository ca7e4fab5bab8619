// `ppsim-profile CONFIG -o PROFILE.yaml` (also `ppsim profile ...`): measures
// the GPT block's kernels on this CPU at the config's shapes, and the cost of
// handing a buffer to another thread, and writes a cost profile.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>

#include "profiler/cpu_profiler.h"
#include "sim/cli/options.h"
#include "sim/config.h"
#include "sim/cost_profile.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  std::string config_path;
  std::string output;
  std::vector<std::string> sets;
  int repetitions = 5;
  int warmup = 2;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&config_path)->value_name("CONFIG"), "YAML config (positional)")(
      "output,o", po::value(&output)->value_name("FILE"), "where to write the profile (YAML)")(
      "set", po::value(&sets)->composing()->value_name("KEY.PATH=VALUE"),
      "override one config value (repeatable)")(
      "repetitions", po::value(&repetitions)->value_name("N"), "timed runs per kernel (5)")(
      "warmup", po::value(&warmup)->value_name("N"), "untimed runs first (2)");
  const std::string usage =
      "usage: ppsim profile CONFIG -o PROFILE.yaml [--repetitions N] [--warmup N] [--set "
      "KEY.PATH=VALUE]...\n\n"
      "Times the GPT block's forward, backward, input-gradient, weight-gradient and recompute\n"
      "kernels on this CPU (fp32, Eigen) at the config's micro-batch, hidden size and sequence\n"
      "(or each token slice of a terapipe config) and the embedding's and loss head's at its\n"
      "vocabulary, with the bytes each holds for backward, and a buffer hand-off between\n"
      "threads at several sizes, fitted to latency + bytes / bandwidth. Writes a versioned cost\n"
      "profile (docs/cost_profile.md).\n\n"
      "example:\n  ppsim profile configs/examples/gpt3-1.3b-8gpu.yaml --set model.layers=4 -o "
      "prof.yaml\n\n";
  po::variables_map vm;
  if (int code = ppsim::cli::parse_command_line(std::vector<std::string>(argv + 1, argv + argc),
                                                desc, "profile", usage, &vm);
      code >= 0) {
    return code;
  }
  if (output.empty()) {
    std::cerr << "ppsim: error: missing -o PROFILE.yaml. See 'ppsim profile --help'.\n";
    return 2;
  }
  const ppsim::Result<std::vector<ppsim::ConfigOverride>> overrides = ppsim::parse_overrides(sets);
  if (!overrides) return ppsim::cli::fail(overrides.error().message);
  const ppsim::Result<ppsim::Config> config = ppsim::load_config(config_path, *overrides);
  if (!config) return ppsim::cli::fail(config.error().message);
  if (!config->model) {
    return ppsim::cli::fail(config_path + ": profiling needs a model section");
  }
  ppsim::Result<ppsim::ProfileRequest> request = ppsim::request_for(*config);
  if (!request) return ppsim::cli::fail(request.error().message);
  request->repetitions = repetitions;
  request->warmup = warmup;
  const ppsim::Result<ppsim::CostProfile> profile =
      ppsim::profile_cpu(*request, [](int done, int total) {
        std::cerr << fmt::format("profile: {}/{} measurements\n", done, total);
      });
  if (!profile) return ppsim::cli::fail(profile.error().message);
  std::ofstream file(output, std::ios::binary);
  file << ppsim::profile_to_yaml(*profile);
  file.close();
  if (!file) return ppsim::cli::fail("cannot write " + output);
  std::cout << fmt::format("{:<26} {:>7} {:>8} {:>12} {:>12} {:>12}\n", "kernel", "tokens",
                           "context", "median", "min", "max");
  for (const ppsim::KernelSample& s : profile->kernels) {
    const std::string name = s.part == ppsim::kBlockPart ? s.kind : s.part + " " + s.kind;
    std::cout << fmt::format("{:<26} {:>7} {:>8} {:>9.3f} ms {:>9.3f} ms {:>9.3f} ms\n", name,
                             s.tokens, s.context, s.median_s * 1e3, s.min_s * 1e3, s.max_s * 1e3);
  }
  for (const ppsim::LinkFit& l : profile->links) {
    std::cout << fmt::format("link {}: latency {:.2f} us, bandwidth {:.2f} GB/s\n", l.name,
                             l.latency_s * 1e6, l.bandwidth_Bps / 1e9);
  }
  std::cout << "profile written to " << output << "\n";
  return 0;
}
