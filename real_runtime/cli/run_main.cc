// `ppsim-run CONFIG` (also `ppsim run ...`): runs the config's schedule for
// real on this CPU with the threads backend (one thread per rank, the GPT
// blocks of profiler/gpt_block.h), with `--backend mpi` under `mpirun -np
// P` (one process per rank), or with `--backend cuda` on one GPU (every
// rank a stream, with its own SMs where the driver allows; cuda.h) or,
// under mpirun, on a GPU per rank with NCCL between them (cuda_mpi.h), and
// reports what it measured, in the same table, JSON and trace formats as
// `ppsim simulate`.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <tuple>

#include "profiler/cpu_profiler.h"
#include "real_runtime/backend_option.h"
#include "real_runtime/runtime.h"
#include "schedules/generators.h"
#ifdef PPSIM_HAVE_MPI
#include "real_runtime/mpi.h"
#endif
#ifdef PPSIM_HAVE_CUDA
#include "real_runtime/cuda.h"
#endif
#ifdef PPSIM_HAVE_CUDA_MPI
#include "real_runtime/cuda_mpi.h"
#endif
#include "sim/cli/options.h"
#include "sim/config/config.h"
#include "sim/cost/cost_model.h"
#include "sim/plan/metrics.h"
#include "sim/plan/simulate.h"
#include "sim/report/summary.h"
#include "sim/report/trace.h"

namespace po = boost::program_options;
using namespace ppsim;  // NOLINT: a tool's main, not a header
using cli::check_cores;
using cli::error_exit;

namespace {

// "RANK:ACTION[:ITERATION]" of the --fail-at and --kill-at test hooks.
Result<runtime::FailAt> parse_fail_at(const std::string& option, const std::string& text,
                                      bool kill) {
  runtime::FailAt at;
  at.kill = kill;
  const size_t colon = text.find(':');
  const size_t second = colon == std::string::npos ? colon : text.find(':', colon + 1);
  try {
    if (colon == std::string::npos) throw std::invalid_argument(text);
    size_t used = 0;
    at.rank = std::stoi(text.substr(0, colon), &used);
    if (used != colon) throw std::invalid_argument(text);
    at.action = text.substr(colon + 1, second == std::string::npos ? second : second - colon - 1);
    if (second != std::string::npos) {
      at.iteration = std::stoi(text.substr(second + 1), &used);
      if (used != text.size() - second - 1) throw std::invalid_argument(text);
    }
  } catch (const std::exception&) {
    return Error{fmt::format("--{}: expected RANK:ACTION[:ITERATION] such as 1:1F3:0, got '{}'",
                             option, text)};
  }
  return at;
}

// MPI's lifetime in this tool when the backend is mpi: MPI_Init after the
// options are parsed, MPI_Finalize when main returns. Only rank 0 reports.
class MpiScope {
 public:
  explicit MpiScope(bool active) : active_(active) {}
  Status start(int* argc, char*** argv) {
    if (!active_) return {};
#ifdef PPSIM_HAVE_MPI
    if (Status st = session_.start(argc, argv); !st) return st;
    rank_ = session_.rank();
    return {};
#else
    (void)argc;
    (void)argv;
    return Error{
        "--backend mpi: this ppsim was built without MPI (install libopenmpi-dev and openmpi-bin, "
        "for example with scripts/setup.sh, and build again)"};
#endif
  }
  bool reports() const { return rank_ == 0; }

 private:
  bool active_;
#ifdef PPSIM_HAVE_MPI
  runtime::MpiSession session_;
#endif
  int rank_ = 0;
};

// The command line of `ppsim run`.
struct Args {
  std::string config_path;
  std::string json_path;
  std::string trace_path;
  std::vector<std::string> sets;
  int iterations = 3;
  double learning_rate = 0.01;
  bool force = false;
  std::string backend = "threads";
  int device = 0;
  bool device_given = false;
  bool shared_sms = false;
  std::string fail_at_text;
  std::string kill_at_text;
};

// Reads the command line into *args: an exit code when the tool stops here
// (--help, a bad option), else -1.
int parse_args(int argc, char** argv, Args* args) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&args->config_path)->value_name("CONFIG"), "YAML config (positional)")(
      "iterations", po::value(&args->iterations)->value_name("N"), "iterations to run (3)")(
      "learning-rate", po::value(&args->learning_rate)->value_name("LR"), "SGD step size (0.01)")(
      "json", po::value(&args->json_path)->value_name("FILE|-"), "the measured summary as JSON")(
      "trace", po::value(&args->trace_path)->value_name("FILE"), "the measured Chrome trace")(
      "force", po::bool_switch(&args->force), "run even with more ranks than cores")(
      "backend", po::value(&args->backend)->value_name("threads|mpi|cuda"),
      "threads (one process), mpi (one process per rank: mpirun -np P ppsim run ...), or cuda "
      "(every rank on one GPU)")("device", po::value(&args->device)->value_name("N"),
                                 "cuda: the GPU to run on (0)")(
      "shared-sms", po::bool_switch(&args->shared_sms),
      "cuda: plain streams sharing every SM instead of a group of SMs per rank")(
      "fail-at", po::value(&args->fail_at_text)->value_name("RANK:ACTION[:IT]"),
      "test hook: that action (of iteration IT, 0) throws")(
      "kill-at", po::value(&args->kill_at_text)->value_name("RANK:ACTION[:IT]"),
      "test hook: that action's process raises SIGKILL")(
      "set", po::value(&args->sets)->composing()->value_name("KEY.PATH=VALUE"), "override a value");
  const std::string usage =
      "usage: ppsim run CONFIG [--backend threads|mpi|cuda] [--iterations N] [--json FILE|-] "
      "[--trace FILE] [--set KEY.PATH=VALUE]...\n\n"
      "Runs CONFIG's schedule for real on this CPU: one thread per pipeline rank, the model's\n"
      "GPT blocks computed in fp32 (Eigen), activations and gradients handed between threads,\n"
      "an SGD step per iteration. Reports the measured iteration time (between the ends of the\n"
      "last two iterations), bubble fraction and peak activation memory per rank.\n"
      "Asynchronous schedules (pipedream, pipedream-2bw) step at their S actions, each\n"
      "microbatch's backward on the weights its forward used; an iteration runs the stream\n"
      "of batches `ppsim simulate` replays, timed by a steady batch in its middle.\n\n"
      "With --backend mpi, mpirun starts one process per pipeline rank and tensors travel as\n"
      "MPI messages; rank 0 reports. A rank that fails ends the whole job (exit code 3).\n\n"
      "With --backend cuda, every rank runs on one GPU in the model's bf16 or fp16: a thread\n"
      "and a stream per rank, each with its own equal share of the SMs (green contexts) where\n"
      "the driver has them; tensors between ranks are device-to-device copies; each action is\n"
      "timed by the GPU tracer (CUPTI, or CUDA events). Synchronous schedules only.\n"
      "Under mpirun (-np P), --backend cuda runs one process per rank, each on a GPU of its\n"
      "own (the k-th rank of a host on device --device + k), with NCCL send/receive between\n"
      "them; rank 0 reports.\n\n"
      "example:\n  ppsim run configs/validate/cpu-small.yaml --trace run.json\n"
      "  mpirun -np 2 ppsim run configs/validate/cpu-small.yaml --backend mpi\n"
      "  ppsim run configs/validate/gpu-h200.yaml --backend cuda\n"
      "  mpirun -np 4 ppsim run configs/validate/gpu-h200.yaml --backend cuda\n\n";
  po::variables_map vm;
  const int code = ppsim::cli::parse_command_line(std::vector<std::string>(argv + 1, argv + argc),
                                                  desc, "run", usage, &vm);
  args->device_given = vm.count("device") > 0;
  return code;
}

// The checks on the options that need no config.
Status check_options(const Args& args) {
  if (args.backend != "threads" && args.backend != "mpi" && args.backend != "cuda") {
    return Error{"--backend: threads, mpi or cuda, got '" + args.backend + "'"};
  }
  if (args.backend != "cuda" && (args.device_given || args.shared_sms)) {
    return Error{"--device and --shared-sms are options of --backend cuda"};
  }
  return runtime::check_backend_built(args.backend);
}

// The run's settings: iterations, step size and the test hooks.
Result<runtime::RunSettings> settings_for(const Args& args) {
  runtime::RunSettings settings;
  settings.iterations = args.iterations;
  settings.learning_rate = args.learning_rate;
  for (const auto& [option, text, kill] : {std::tuple{"fail-at", args.fail_at_text, false},
                                           std::tuple{"kill-at", args.kill_at_text, true}}) {
    if (text.empty()) continue;
    Result<runtime::FailAt> at = parse_fail_at(option, text, kill);
    if (!at) return at.error();
    settings.fail_at = *at;
  }
  return settings;
}

// A rank of a job of several processes failed alone: the others wait for it,
// so it ends them all.
[[noreturn]] void abort_job([[maybe_unused]] const std::string& message) {
#if defined(PPSIM_HAVE_MPI)
  cli::error_exit(message);
  runtime::mpi_abort(runtime::kRankFailedExitCode);
#endif
  std::abort();  // not reached: only the MPI backends end a job
}

// What a run on a GPU says of where it ran.
[[maybe_unused]] std::string placements_text(const std::vector<std::string>& placements) {
  std::string text;
  for (size_t r = 0; r < placements.size(); ++r) {
    text += fmt::format("{}rank {}: {}", r == 0 ? "" : "; ", r, placements[r]);
  }
  return text;
}

// The schedule run for real on the chosen backend; *measured_on says where.
// An error here is every rank's (or the one process's); a rank that fails
// alone ends the job.
Result<runtime::RunResult> run_on_backend(const Args& args, bool cuda_mpi, const Schedule& schedule,
                                          const runtime::RuntimeModel& model,
                                          const runtime::RunSettings& settings,
                                          std::string* measured_on) {
  *measured_on = fmt::format("this CPU ({} backend, fp32)", args.backend);
  if (args.backend == "threads") return runtime::run_threads(schedule, model, settings);
  if (cuda_mpi) {
#ifdef PPSIM_HAVE_CUDA_MPI
    runtime::CudaRunOptions options;
    options.device = args.device;
    runtime::CudaRunInfo info;
    Result<runtime::RunResult> run =
        runtime::run_cuda_mpi(schedule, model, settings, options, &info);
    if (!run && !info.failed_on_every_rank) abort_job(run.error().message);
    if (run) {
      *measured_on = fmt::format("{} (cuda backend over NCCL, {}; {}; timing: {})",
                                 placements_text(info.placements), to_string(model.dtype),
                                 info.sharing, info.timing);
    }
    return run;
#else
    return Error{
        "--backend cuda under mpirun: this ppsim was built without NCCL (the CUDA toolkit's "
        "libnccl and nccl.h) or MPI; without mpirun, --backend cuda runs every rank on one GPU"};
#endif
  }
#ifdef PPSIM_HAVE_CUDA
  if (args.backend == "cuda") {
    runtime::CudaRunOptions options;
    options.device = args.device;
    options.split_sms = !args.shared_sms;
    runtime::CudaRunInfo info;
    Result<runtime::RunResult> run = runtime::run_cuda(schedule, model, settings, options, &info);
    if (run) {
      *measured_on = fmt::format("{} (cuda backend, {}; {}; timing: {})",
                                 info.placements.empty() ? "the GPU" : info.placements[0],
                                 to_string(model.dtype), info.sharing, info.timing);
    }
    return run;
  }
#endif
#ifdef PPSIM_HAVE_MPI
  if (args.backend == "mpi") {
    if (Status st = runtime::check_mpi_run(schedule, model, settings); !st) {
      return Error{st.message()};
    }
    Result<runtime::RunResult> run = runtime::run_mpi(schedule, model, settings);
    if (!run) abort_job(run.error().message);
    return run;
  }
#endif
  // check_options said so first.
  return Error{fmt::format("--backend {}: this ppsim was built without it", args.backend)};
}

// The threads backend holds every rank's weights and gradients in this
// process: a model whose weights alone outgrow the machine's memory is an
// error before anything is allocated (it would thrash, or be killed).
Status check_fits(const Config& config, const runtime::RuntimeModel& model) {
  const int64_t parameters = model_parameters(*config.model);
  const int scalar_bytes = model.precision == runtime::Precision::kFloat64 ? 8 : 4;
  const Status fits = cli::check_memory(
      2.0 * static_cast<double>(parameters) * scalar_bytes,
      fmt::format("the model's {:.4g} billion weights and their gradients, in fp{},",
                  parameters / 1e9, 8 * scalar_bytes));
  if (fits) return fits;
  return Error{fits.message() +
               ": run a smaller model (e.g. --set model.layers=2), or simulate this one"};
}

// Rank 0's report: the summary table and losses, the JSON and the trace.
int report(const Args& args, const Config& config, const Schedule& schedule,
           runtime::RunResult* run, const std::string& measured_on) {
  // An asynchronous schedule's iterations are runs of a stream of batches:
  // report per batch, as the simulator does, with its extra weight versions.
  if (is_asynchronous(config.schedule.kind)) {
    batches_as_iterations(config.num_microbatches(), &run->timeline);
  }
  const Summary summary = summarize(config, schedule.name, run->timeline, run->weight_bytes);
  if (args.json_path != "-") {
    std::cout << "measured on " << measured_on << "\n" << format_summary_table(summary);
    std::cout << "loss per iteration:";
    for (double loss : run->losses) std::cout << fmt::format(" {:.4f}", loss);
    std::cout << "\n";
  }
  if (!args.json_path.empty()) {
    if (Status st = cli::write_output(args.json_path, summary_to_json(summary)); !st) {
      return error_exit(st.message());
    }
  }
  if (!args.trace_path.empty()) {
    if (Status st = cli::write_output(args.trace_path, chrome_trace_json(run->timeline)); !st) {
      return error_exit(st.message());
    }
    std::cerr << "trace written to " << args.trace_path << " (open it in ui.perfetto.dev)\n";
  }
  return 0;
}

}  // namespace

int tool_main(int argc, char** argv) {
  Args args;
  if (int code = parse_args(argc, argv, &args); code >= 0) return code;
  if (Status st = check_options(args); !st) return error_exit(st.message());
  const bool mpi = args.backend == "mpi";
#ifdef PPSIM_HAVE_MPI
  // Under mpirun, the CUDA backend runs a process per GPU.
  const bool cuda_mpi = args.backend == "cuda" && runtime::mpi_launched();
#else
  const bool cuda_mpi = false;
#endif
  MpiScope mpi_scope(mpi || cuda_mpi);
  if (Status st = mpi_scope.start(&argc, &argv); !st) return error_exit(st.message());
  // Every rank meets the same input errors: one reports them.
  const auto error_once = [&](const std::string& message) {
    return mpi_scope.reports() ? cli::error_exit(message) : 1;
  };
  if (cuda_mpi && args.shared_sms)
    return error_once("--shared-sms: under mpirun every rank has a GPU of its own");
  if (args.iterations < 2)
    return error_once("--iterations: at least 2 (the steady period needs two ends)");
  if (Status st = cli::check_outputs({{"--json", args.json_path}, {"--trace", args.trace_path}});
      !st) {
    return error_once(st.message());
  }
  Result<std::vector<ConfigOverride>> overrides = parse_overrides(args.sets);
  if (!overrides) return error_once(overrides.error().message);
  Result<Config> config = load_config(args.config_path, *overrides);
  if (!config) return error_once(config.error().message);
  if (Status st = check_runnable_model(*config, "ppsim run"); !st) return error_once(st.message());
  if (Status st = runtime::check_executable(*config, "ppsim run"); !st) {
    return error_once(st.message());
  }
  if (Status st = check_cores(config->parallel.pipeline, args.force, mpi_scope.reports()); !st) {
    return error_once(st.message());
  }
  Result<std::vector<int>> lengths = slice_lengths_for(*config);
  if (!lengths) return error_once(lengths.error().message);
  Result<Schedule> schedule = schedule_for(*config, std::max(1, static_cast<int>(lengths->size())));
  if (!schedule) return error_once(schedule.error().message);
  Result<runtime::RunSettings> settings = settings_for(args);
  if (!settings) return error_once(settings.error().message);

  const runtime::RuntimeModel model = runtime::model_for(*config, *lengths);
  if (args.backend == "threads") {
    if (Status st = check_fits(*config, model); !st) return error_once(st.message());
  }
  std::string measured_on;
  Result<runtime::RunResult> run =
      run_on_backend(args, cuda_mpi, *schedule, model, *settings, &measured_on);
  if (!run) return error_once(run.error().message);
  if (!mpi_scope.reports()) return 0;
  return report(args, *config, *schedule, &*run, measured_on);
}

int main(int argc, char** argv) {
  return ppsim::guarded_main("ppsim-run", [&] { return tool_main(argc, argv); });
}
