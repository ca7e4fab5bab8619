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

namespace {

// The command line of `ppsim profile`.
struct Args {
  std::string config_path;
  std::string output;
  std::vector<std::string> sets;
  int repetitions = 5;
  int warmup = 2;
  std::string device = "cpu";
  int sm_groups = 1;
  bool sm_groups_given = false;
};

// A usage error: said with where to look, exit code 2.
int usage_error(const std::string& message) {
  std::cerr << "ppsim: error: " << message << ". See 'ppsim profile --help'.\n";
  return 2;
}

// Reads and checks the command line into *args: an exit code when the tool
// stops here (--help, a bad or missing option), else -1.
int parse_args(int argc, char** argv, Args* args) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&args->config_path)->value_name("CONFIG"), "YAML config (positional)")(
      "output,o", po::value(&args->output)->value_name("FILE"),
      "where to write the profile (YAML)")(
      "set", po::value(&args->sets)->composing()->value_name("KEY.PATH=VALUE"),
      "override one config value (repeatable)")(
      "repetitions",
      po::value(&args->repetitions)
          ->value_name("N")
          ->notifier(ppsim::cli::within("--repetitions", 1, 1000)),
      "timed runs per kernel (5)")(
      "warmup",
      po::value(&args->warmup)->value_name("N")->notifier(ppsim::cli::within("--warmup", 0, 1000)),
      "untimed runs first (2)")(
      "device", po::value(&args->device)->value_name("cpu|cuda"),
      "what to time: this CPU (cpu, the default) or CUDA device 0 (cuda)")(
      "sm-groups", po::value(&args->sm_groups)->value_name("N"),
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
  args->sm_groups_given = vm.count("sm-groups") != 0;
  if (args->output.empty()) return usage_error("missing -o PROFILE.yaml");
  if (args->device != "cpu" && args->device != "cuda") {
    return usage_error("--device: expected cpu or cuda, got '" + args->device + "'");
  }
  if (args->sm_groups_given && args->device != "cuda") {
    return usage_error("--sm-groups splits a GPU: it needs --device cuda");
  }
  if (args->sm_groups < 1) {
    return usage_error(fmt::format("--sm-groups: expected 1 or more, got {}", args->sm_groups));
  }
  return -1;
}

// The kernels timed on the device asked for, with each step's progress.
ppsim::Result<ppsim::CostProfile> time_kernels(const ppsim::Config& config, const Args& args,
                                               const ppsim::ProfileRequest& request) {
#ifdef PPSIM_HAVE_CUDA
  if (args.device == "cuda") {
    ppsim::Result<ppsim::GpuProfileOptions> options = ppsim::gpu_options_for(config);
    if (!options) return options.error();
    options->sm_groups = args.sm_groups;
    return ppsim::profile_gpu(request, *options, [](const std::string& line) {
      std::cerr << "profile: " << line << "\n";
    });
  }
#else
  (void)config;
  if (args.device == "cuda")
    return ppsim::Error{"--device cuda: this ppsim was built without CUDA"};
#endif
  return ppsim::profile_cpu(request, [](int done, int total) {
    std::cerr << fmt::format("profile: {}/{} measurements\n", done, total);
  });
}

// The profile's kernels and links, one line each.
void print_profile(const ppsim::CostProfile& profile) {
  std::cout << fmt::format("{:<26} {:>7} {:>8} {:>12} {:>12} {:>12}\n", "kernel", "tokens",
                           "context", "median", "min", "max");
  for (const ppsim::KernelSample& s : profile.kernels) {
    const std::string name =
        s.part == ppsim::KernelPart::kBlock
            ? std::string(ppsim::to_string(s.kind))
            : fmt::format("{} {}", ppsim::to_string(s.part), ppsim::to_string(s.kind));
    std::cout << fmt::format("{:<26} {:>7} {:>8} {:>9.3f} ms {:>9.3f} ms {:>9.3f} ms\n", name,
                             s.tokens, s.context, s.median_s * 1e3, s.min_s * 1e3, s.max_s * 1e3);
  }
  for (const ppsim::LinkFit& l : profile.links) {
    std::cout << fmt::format("link {}: latency {:.2f} us, bandwidth {:.2f} GB/s\n", l.name,
                             l.latency_s * 1e6, l.bandwidth_Bps / 1e9);
  }
}

}  // namespace

int tool_main(int argc, char** argv) {
  Args args;
  if (int code = parse_args(argc, argv, &args); code >= 0) return code;
#ifndef PPSIM_HAVE_CUDA
  if (args.device == "cuda") {
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
  // Profiling takes minutes: an -o it cannot write is said first.
  if (ppsim::Status st = ppsim::cli::check_outputs({{"-o", args.output}}); !st) {
    return error_once(st.message());
  }
  const ppsim::Result<std::vector<ppsim::ConfigOverride>> overrides =
      ppsim::parse_overrides(args.sets);
  if (!overrides) return error_once(overrides.error().message);
  const ppsim::Result<ppsim::Config> config = ppsim::load_config(args.config_path, *overrides);
  if (!config) return error_once(config.error().message);
  if (ppsim::Status st = ppsim::check_runnable_model(*config, "ppsim profile"); !st)
    return error_once(st.message());
  ppsim::Result<ppsim::ProfileRequest> request = ppsim::request_for(*config);
  if (!request) return error_once(request.error().message);
  request->repetitions = args.repetitions;
  request->warmup = args.warmup;
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
  ppsim::Result<ppsim::CostProfile> profile = time_kernels(*config, args, *request);
  if (!profile) return ppsim::cli::error_exit(profile.error().message);
  if (mpi_link) profile->links.push_back(std::move(*mpi_link));
  if (ppsim::Status st = ppsim::cli::write_output(args.output, ppsim::profile_to_yaml(*profile));
      !st) {
    return ppsim::cli::error_exit(st.message());
  }
  if (args.output == "-") return 0;  // stdout holds the profile
  print_profile(*profile);
  std::cout << "profile written to " << args.output << "\n";
  return 0;
}

int main(int argc, char** argv) {
  return ppsim::guarded_main("ppsim-profile", [&] { return tool_main(argc, argv); });
}
