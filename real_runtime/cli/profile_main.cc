// `ppsim-profile CONFIG -o PROFILE.yaml` (also `ppsim profile ...`): measures
// the GPT block's kernels on this CPU at the config's shapes, and the cost of
// handing a buffer to another thread, and writes a cost profile. Launched by
// mpirun (`mpirun -np 2 ppsim profile ...`), every process first takes part
// in a ping-pong between ranks 0 and 1 (real_runtime/mpi.h), then rank 0
// alone profiles the kernels and writes the profile, with the link "mpi".
// With `--device cuda` it times the GPU block (and head) and the GPU's copy
// links instead (profiler/gpu_profiler.h), on all of the device's SMs or,
// with `--sm-groups N`, on one of N equal groups of them (a green context).
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>
#include <optional>

#include "profiler/cpu_profiler.h"
#ifdef PPSIM_HAVE_CUDA
#include "profiler/gpu_profiler.h"
#endif
#ifdef PPSIM_HAVE_MPI
#include "real_runtime/mpi.h"
#endif
#include "sim/cli/options.h"
#include "sim/config/config.h"
#include "sim/cost/cost_profile.h"

namespace po = boost::program_options;

int tool_main(int argc, char** argv) {
  std::string config_path;
  std::string output;
  std::vector<std::string> sets;
  int repetitions = 5;
  int warmup = 2;
  std::string device = "cpu";
  int sm_groups = 1;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&config_path)->value_name("CONFIG"), "YAML config (positional)")(
      "output,o", po::value(&output)->value_name("FILE"), "where to write the profile (YAML)")(
      "set", po::value(&sets)->composing()->value_name("KEY.PATH=VALUE"),
      "override one config value (repeatable)")(
      "repetitions", po::value(&repetitions)->value_name("N"), "timed runs per kernel (5)")(
      "warmup", po::value(&warmup)->value_name("N"), "untimed runs first (2)")(
      "device", po::value(&device)->value_name("cpu|cuda"),
      "what to time: this CPU (cpu, the default) or CUDA device 0 (cuda)")(
      "sm-groups", po::value(&sm_groups)->value_name("N"),
      "with --device cuda: time the kernels on one of N equal groups of the GPU's SMs (1)");
  const std::string usage =
      "usage: ppsim profile CONFIG -o PROFILE.yaml [--device cpu|cuda] [--sm-groups N] "
      "[--repetitions N] [--warmup N] [--set KEY.PATH=VALUE]...\n\n"
      "Times the GPT block's forward, backward, input-gradient, weight-gradient and recompute\n"
      "kernels on this CPU (fp32, Eigen) at the config's micro-batch, hidden size and sequence\n"
      "(or each token slice of a terapipe config) and the embedding's and loss head's at its\n"
      "vocabulary, with the bytes each holds for backward, and a buffer hand-off between\n"
      "threads at several sizes, fitted to latency + bytes / bandwidth. Writes a versioned cost\n"
      "profile (docs/cost_profile.md).\n\n"
      "Launched by mpirun with 2 or more processes, it first times an MPI ping-pong between\n"
      "ranks 0 and 1 at the same sizes (one way = half the median round trip) and adds the\n"
      "link \"mpi\" (with one process it fails); rank 0 alone then times the kernels and\n"
      "writes the profile.\n\n"
      "With --device cuda (a build with CUDA) it times the GPU block, embedding and head\n"
      "(cuBLAS, the model's bf16 or fp16) and the optimizer step at the model's real sizes on\n"
      "CUDA device 0 instead, each action the span of its GPU work (CUPTI; CUDA events when\n"
      "CUPTI is unavailable); with tensor parallelism t it runs heads / t and ffn / t at the\n"
      "full hidden size and the whole vocabulary (an upper bound on one shard;\n"
      "profiler/README.md). --sm-groups N (N > 1) runs the kernels on one of N equal groups of\n"
      "the GPU's SMs (a green context), as each of N pipeline ranks sharing the GPU would;\n"
      "an error where the driver cannot split the GPU so. Links, on the whole device, each\n"
      "fitted to latency + bytes / bandwidth: device-to-device, host-to-device and\n"
      "device-to-host (pinned), and with two or more devices peer (device 0 to 1) and nccl\n"
      "(send/receive). PPSIM_TRACER=events times each action with CUDA events instead of\n"
      "CUPTI.\n\n"
      "examples:\n  ppsim profile configs/examples/gpt3-1.3b-8gpu.yaml --set model.layers=4 -o "
      "prof.yaml\n"
      "  mpirun -np 2 ppsim profile configs/validate/cpu-small.yaml -o prof.yaml\n"
      "  ppsim profile configs/examples/gpt3-175b-64gpu.yaml --device cuda -o "
      "gpt3-175b-h200.yaml\n"
      "  ppsim profile configs/examples/gpt3-1.3b-8gpu.yaml --device cuda --sm-groups 4 -o "
      "quarter-gpu.yaml\n\n";
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
  if (device != "cpu" && device != "cuda") {
    std::cerr << "ppsim: error: --device: expected cpu or cuda, got '" << device
              << "'. See 'ppsim profile --help'.\n";
    return 2;
  }
  if (vm.count("sm-groups") != 0 && device != "cuda") {
    std::cerr << "ppsim: error: --sm-groups splits a GPU: it needs --device cuda. See 'ppsim "
                 "profile --help'.\n";
    return 2;
  }
  if (sm_groups < 1) {
    std::cerr << "ppsim: error: --sm-groups: expected 1 or more, got " << sm_groups
              << ". See 'ppsim profile --help'.\n";
    return 2;
  }
#ifndef PPSIM_HAVE_CUDA
  if (device == "cuda") {
    return ppsim::cli::error_exit("--device cuda: this ppsim was built without CUDA");
  }
#endif
  // Under mpirun every process reads the same config and fails alike up
  // to the ping-pong: only rank 0 reports.
  int rank = 0;
#ifdef PPSIM_HAVE_MPI
  ppsim::runtime::MpiSession mpi;
  if (ppsim::runtime::mpi_launched()) {
    if (ppsim::Status st = mpi.start(&argc, &argv); !st)
      return ppsim::cli::error_exit(st.message());
    rank = mpi.rank();
  }
#endif
  const auto error_once = [&](const std::string& message) {
    return rank == 0 ? ppsim::cli::error_exit(message) : 1;
  };
  const ppsim::Result<std::vector<ppsim::ConfigOverride>> overrides = ppsim::parse_overrides(sets);
  if (!overrides) return error_once(overrides.error().message);
  const ppsim::Result<ppsim::Config> config = ppsim::load_config(config_path, *overrides);
  if (!config) return error_once(config.error().message);
  if (ppsim::Status st = ppsim::check_runnable_model(*config, "ppsim profile"); !st)
    return error_once(st.message());
  ppsim::Result<ppsim::ProfileRequest> request = ppsim::request_for(*config);
  if (!request) return error_once(request.error().message);
  request->repetitions = repetitions;
  request->warmup = warmup;
  std::optional<ppsim::LinkFit> mpi_link;
#ifdef PPSIM_HAVE_MPI
  if (mpi.started() && !request->link_sizes.empty()) {
    if (rank == 0 && ppsim::runtime::mpi_size() >= 2) {
      std::cerr << fmt::format("profile: MPI ping-pong between ranks 0 and 1 ({} processes)\n",
                               ppsim::runtime::mpi_size());
    }
    ppsim::Result<ppsim::LinkFit> link = ppsim::runtime::measure_mpi_link(
        "mpi", request->link_sizes, request->warmup, request->repetitions);
    if (!link) return error_once(fmt::format("profile: mpi ping-pong: {}", link.error().message));
    if (rank != 0) return 0;  // rank 0 alone times the kernels
    mpi_link = std::move(*link);
  }
#endif
  if (rank != 0) return 0;
  ppsim::Result<ppsim::CostProfile> profile = ppsim::Error{"not profiled"};
#ifdef PPSIM_HAVE_CUDA
  if (device == "cuda") {
    ppsim::Result<ppsim::GpuProfileOptions> options = ppsim::gpu_options_for(*config);
    if (!options) return ppsim::cli::error_exit(options.error().message);
    options->sm_groups = sm_groups;
    profile = ppsim::profile_gpu(*request, *options, [](const std::string& line) {
      std::cerr << "profile: " << line << "\n";
    });
  }
#endif
  if (device == "cpu") {
    profile = ppsim::profile_cpu(*request, [](int done, int total) {
      std::cerr << fmt::format("profile: {}/{} measurements\n", done, total);
    });
  }
  if (!profile) return ppsim::cli::error_exit(profile.error().message);
  if (mpi_link) profile->links.push_back(std::move(*mpi_link));
  std::ofstream file(output, std::ios::binary);
  file << ppsim::profile_to_yaml(*profile);
  file.close();
  if (!file) return ppsim::cli::error_exit("cannot write " + output);
  std::cout << fmt::format("{:<26} {:>7} {:>8} {:>12} {:>12} {:>12}\n", "kernel", "tokens",
                           "context", "median", "min", "max");
  for (const ppsim::KernelSample& s : profile->kernels) {
    const std::string name =
        s.part == ppsim::KernelPart::kBlock
            ? std::string(ppsim::to_string(s.kind))
            : fmt::format("{} {}", ppsim::to_string(s.part), ppsim::to_string(s.kind));
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

int main(int argc, char** argv) {
  return ppsim::guarded_main("ppsim-profile", [&] { return tool_main(argc, argv); });
}
