// `ppsim-validate CONFIG` (also `ppsim validate ...`): profile this CPU (or
// take --profile), predict each schedule from the profile, run it for real
// with the threads backend, and report how far apart they are. With
// `--backend cuda` the same on one GPU: the GPU profiler on one rank's share
// of the SMs, the CUDA backend (cuda.h); under mpirun, on a GPU per rank:
// rank 0 profiles a whole GPU and its NCCL link, every rank predicts from
// that profile, the CUDA backend over NCCL runs (cuda_mpi.h), rank 0 reports.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "profiler/cpu_profiler.h"
#include "real_runtime/backend_option.h"
#include "real_runtime/validate.h"
#ifdef PPSIM_HAVE_CUDA
#include "profiler/gpu_profiler.h"
#include "real_runtime/cuda.h"
#endif
#ifdef PPSIM_HAVE_CUDA_MPI
#include "real_runtime/cuda_mpi.h"
#include "real_runtime/mpi.h"
#endif
#include "sim/cli/options.h"
#include "sim/config/config.h"
#include "sim/core/json.h"
#include "sim/cost/cost_profile.h"
#include "sim/fit/runs_file.h"
#include "sim/plan/compare.h"
#include "sim/report/trace.h"

namespace po = boost::program_options;
using namespace ppsim;  // NOLINT: a tool's main, not a header
using cli::check_cores;
using cli::error_exit;

namespace {

std::string results_json(const std::vector<runtime::ScheduleValidation>& results,
                         const std::string& profile_path) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().field("profile", profile_path).key("results").begin_array();
  for (const runtime::ScheduleValidation& v : results) {
    w.begin_object().field("schedule", v.schedule).field("ok", v.ok());
    if (!v.ok()) {
      w.field("reason", v.reason).end_object();
      continue;
    }
    w.field("predicted_iteration_s", v.predicted_iteration_s);
    w.field("measured_iteration_s", v.measured_iteration_s);
    w.field("measured_spread", v.measured_spread);
    w.field("relative_error", v.relative_error());
    w.field("predicted_bubble_fraction", v.predicted_bubble);
    w.field("measured_bubble_fraction", v.measured_bubble);
    for (const auto& [key, bytes] :
         {std::pair{"predicted_peak_activation_bytes", &v.predicted_peak_activation_bytes},
          std::pair{"measured_peak_activation_bytes", &v.measured_peak_activation_bytes}}) {
      w.key(key).begin_array();
      for (int64_t b : *bytes) w.value(b);
      w.end_array();
    }
    w.key("action_kinds").begin_array();
    for (const runtime::KindError& k : v.kinds) {
      w.begin_object().field("kind", std::string(1, action_kind_letter(k.kind)));
      w.field("count", k.count).field("median_relative_error", k.median_relative_error);
      w.end_object();
    }
    w.end_array().end_object();
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

// `path` as a runs file at `runs` names it: relative to the runs file's
// folder, so that the two can move together.
std::string relative_to(const std::string& path, const std::string& runs) {
  const std::filesystem::path folder =
      std::filesystem::absolute(runs).parent_path().lexically_normal();
  const std::filesystem::path absolute = std::filesystem::absolute(path).lexically_normal();
  const std::filesystem::path relative = absolute.lexically_relative(folder);
  return relative.empty() ? absolute.string() : relative.string();
}

// The command line of `ppsim validate`.
struct Args {
  std::string config_path;
  std::string profile_path;
  std::string schedules = "gpipe,1f1b,interleaved-1f1b:2,zb-h1,zb-h2,zb-v,terapipe:2";
  std::string json_path;
  std::string trace_path;
  std::string runs_path;
  std::vector<std::string> sets;
  runtime::ValidateOptions options;
  int repetitions = 5;
  bool force = false;
  std::string backend = "threads";
  bool shared_sms = false;
};

// Reads the command line into *args: an exit code when the tool stops here
// (--help, a bad option), else -1.
int parse_args(int argc, char** argv, Args* args) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&args->config_path)->value_name("CONFIG"), "YAML config (positional)")(
      "schedules", po::value(&args->schedules)->value_name("LIST"),
      "compare-style list (KIND or KIND:N); default: the synchronous kinds")(
      "profile", po::value(&args->profile_path)->value_name("FILE"),
      "use this cost profile instead of profiling now")(
      "warmup", po::value(&args->options.warmup)->value_name("N"), "unmeasured iterations (1)")(
      "iterations", po::value(&args->options.iterations)->value_name("N"),
      "measured iterations (3)")("repetitions",
                                 po::value(&args->repetitions)
                                     ->value_name("N")
                                     ->notifier(cli::within("--repetitions", 1, 1000)),
                                 "profiler repetitions (5)")(
      "json", po::value(&args->json_path)->value_name("FILE|-"), "results as JSON")(
      "trace", po::value(&args->trace_path)->value_name("FILE"),
      "Chrome trace with the predicted and measured timelines of each schedule")(
      "runs-out", po::value(&args->runs_path)->value_name("FILE"),
      "save each schedule's predicted and measured actions and transfers for ppsim calibrate "
      "(JSON; a profile taken now is saved beside it)")("force", po::bool_switch(&args->force),
                                                        "run even with more ranks than cores")(
      "backend", po::value(&args->backend)->value_name("threads|cuda"),
      "threads (this CPU, one thread per rank), or cuda (every rank on GPU 0)")(
      "shared-sms", po::bool_switch(&args->shared_sms),
      "cuda: ranks share every SM (plain streams), profiled on the whole GPU")(
      "set", po::value(&args->sets)->composing()->value_name("KEY.PATH=VALUE"), "override a value");
  const std::string usage =
      "usage: ppsim validate CONFIG [--schedules LIST] [--profile FILE] [--warmup N] "
      "[--iterations N] [--json FILE|-] [--trace FILE] [--runs-out FILE]\n\n"
      "Profiles this CPU's kernels (unless --profile), predicts each schedule from the profile,\n"
      "runs the same per-rank programs for real (threads backend, one thread per rank), and\n"
      "reports predicted against measured: iteration time, per-action-kind durations, bubble\n"
      "fraction and peak activation memory.\n\n"
      "With --backend cuda the same on GPU 0: the GPU kernels profiled on one rank's share of\n"
      "the SMs (a green context of 1/p of them; --shared-sms: the whole GPU), the ranks run as\n"
      "streams of that GPU (ppsim run --backend cuda). Under mpirun -np P, on a GPU per rank:\n"
      "rank 0 profiles a whole GPU and the NCCL link, the transfers are priced by that link\n"
      "(costs.link nccl), the ranks run one process per GPU with NCCL between them, and rank 0\n"
      "reports.\n\n"
      "example:\n  ppsim validate configs/validate/cpu-small.yaml --json -\n"
      "  ppsim validate configs/validate/gpu-h200.yaml --backend cuda\n"
      "  mpirun -np 4 ppsim validate configs/validate/gpu-h200.yaml --backend cuda\n\n";
  po::variables_map vm;
  return cli::parse_command_line(std::vector<std::string>(argv + 1, argv + argc), desc, "validate",
                                 usage, &vm);
}

// Where this process stands: alone, or one rank of an mpirun over NCCL.
struct Ranks {
  bool over_nccl = false;
  int rank = 0;
};

// An input error: every rank meets it, rank 0 says it.
int fail(const Ranks& ranks, const std::string& message) {
  return ranks.rank == 0 ? error_exit(message) : 1;
}

// Every shape any of the schedules needs (token-level ones need their slices).
Result<ProfileRequest> request_for_schedules(const Config& config, const Args& args) {
  Result<ProfileRequest> request = request_for(config);
  if (!request) return request;
  for (const std::string& entry : args.options.schedules) {
    Result<ProfileRequest> more = request_for(config_for_entry(config, entry));
    if (!more) continue;  // validate reports the schedule's own error
    for (const auto& shape : more->shapes) {
      if (std::find(request->shapes.begin(), request->shapes.end(), shape) ==
          request->shapes.end()) {
        request->shapes.push_back(shape);
      }
    }
  }
  request->repetitions = args.repetitions;
  return request;
}

// The profile as YAML, measured here: the CPU's, or on a GPU rank 0's, which
// under mpirun every rank receives (or its error).
Result<std::string> measure_profile(const Config& config, const Args& args, const Ranks& ranks) {
  Result<ProfileRequest> request = request_for_schedules(config, args);
  if (!request) return request.error();
  Result<CostProfile> profile = Error{"not profiled on this rank"};
  if (args.backend != "cuda") {
    profile = profile_cpu(*request, [](int done, int total) {
      std::cerr << fmt::format("profile: {}/{} measurements\n", done, total);
    });
  } else if (ranks.rank == 0) {
#ifdef PPSIM_HAVE_CUDA
    // An error here goes to the other ranks too (below), which wait for it.
    Result<GpuProfileOptions> gpu = gpu_options_for(config);
    if (gpu) {
      // As each rank will run: on its share of the SMs (over NCCL: a whole GPU).
      if (!args.shared_sms && !ranks.over_nccl) gpu->sm_groups = config.parallel.pipeline;
      profile = profile_gpu(*request, *gpu, [](const std::string& line) {
        std::cerr << "profile: " << line << "\n";
      });
    } else {
      profile = gpu.error();
    }
#endif
  }
  std::string yaml = profile ? profile_to_yaml(*profile) : std::string();
  std::string error = profile ? std::string() : profile.error().message;
#ifdef PPSIM_HAVE_CUDA_MPI
  if (ranks.over_nccl) {  // rank 0's profile, or its error, on every rank
    yaml = runtime::mpi_broadcast_text(yaml, 0);
    error = runtime::mpi_broadcast_text(error, 0);
  }
#endif
  if (!error.empty()) return Error{error};
  return yaml;
}

// Profiles now and writes the profile beside the runs file, which names it;
// else (and on the other ranks) to a scratch file. Returns its path.
Result<std::string> profile_now(const Config& config, const Args& args, const Ranks& ranks) {
  Result<std::string> yaml = measure_profile(config, args, ranks);
  if (!yaml) return yaml;
  const std::string path =
      args.runs_path.empty() || ranks.rank != 0
          ? fmt::format("/tmp/ppsim-validate-{}.profile.yaml", getpid())
          : std::filesystem::path(args.runs_path).replace_extension(".profile.yaml").string();
  const Status wrote = cli::write_output(path, *yaml);
  std::string write_error = wrote ? std::string() : wrote.message();
#ifdef PPSIM_HAVE_CUDA_MPI
  if (ranks.over_nccl) write_error = runtime::mpi_first_error(write_error);  // all stop, or none
#endif
  if (!write_error.empty()) return Error{write_error};
  if (ranks.rank == 0) std::cerr << "profile written to " << path << "\n";
  return path;
}

// With --backend cuda each schedule runs on the GPU: one process per GPU over
// NCCL under mpirun, else every rank a stream of GPU 0. The threads backend
// is validate's default runner.
void use_cuda_runner([[maybe_unused]] const Args& args, [[maybe_unused]] const Ranks& ranks,
                     [[maybe_unused]] runtime::ValidateOptions* options) {
#ifdef PPSIM_HAVE_CUDA_MPI
  if (ranks.over_nccl) {
    options->run = [rank = ranks.rank](const Schedule& schedule, const runtime::RuntimeModel& model,
                                       const runtime::RunSettings& settings) {
      runtime::CudaRunInfo info;
      Result<runtime::RunResult> run = runtime::run_cuda_mpi(schedule, model, settings, {}, &info);
      if (!run && !info.failed_on_every_rank) {
        // Only this rank failed; the others wait for it: end them all.
        cli::error_exit(run.error().message);
        runtime::mpi_abort(runtime::kRankFailedExitCode);
      }
      if (run && rank == 0) {
        std::cerr << fmt::format("run: {} on {} GPUs; {}; timing: {}\n", schedule.name,
                                 info.placements.size(), info.sharing, info.timing);
      }
      return run;
    };
    return;
  }
#endif
#ifdef PPSIM_HAVE_CUDA
  if (args.backend != "cuda") return;
  runtime::CudaRunOptions run_options;
  run_options.split_sms = !args.shared_sms;
  options->run = [run_options](const Schedule& schedule, const runtime::RuntimeModel& model,
                               const runtime::RunSettings& settings) {
    runtime::CudaRunInfo info;
    Result<runtime::RunResult> run =
        runtime::run_cuda(schedule, model, settings, run_options, &info);
    std::cerr << fmt::format("run: {} on {}; {}; timing: {}\n", schedule.name,
                             info.placements.empty() ? "the GPU" : info.placements[0], info.sharing,
                             info.timing);
    return run;
  };
#endif
}

// The table on stdout: one line per schedule.
void print_results(const std::vector<runtime::ScheduleValidation>& results) {
  std::cout << fmt::format("{:<20} {:>12} {:>12} {:>8} {:>16} {:>22}  {}\n", "schedule",
                           "predicted", "measured", "error", "bubble pred/meas",
                           "peak act. MiB pred/meas", "median error per kind");
  for (const runtime::ScheduleValidation& v : results) {
    if (!v.ok()) {
      std::cout << fmt::format("{:<20} cannot run: {}\n", v.schedule, v.reason);
      continue;
    }
    int64_t predicted_peak = 0;
    int64_t measured_peak = 0;
    for (int64_t b : v.predicted_peak_activation_bytes)
      predicted_peak = std::max(predicted_peak, b);
    for (int64_t b : v.measured_peak_activation_bytes) measured_peak = std::max(measured_peak, b);
    std::string kinds;
    for (const runtime::KindError& k : v.kinds) {
      kinds +=
          fmt::format("{} {:.1f}%  ", action_kind_letter(k.kind), 100 * k.median_relative_error);
    }
    std::cout << fmt::format(
        "{:<20} {:>10.1f}ms {:>10.1f}ms {:>7.1f}% {:>7.1f}/{:<7.1f}% "
        "{:>10.2f}/{:<11.2f}  {}\n",
        v.schedule, 1e3 * v.predicted_iteration_s, 1e3 * v.measured_iteration_s,
        100 * v.relative_error(), 100 * v.predicted_bubble, 100 * v.measured_bubble,
        predicted_peak / 1048576.0, measured_peak / 1048576.0, kinds);
  }
}

void warn_unsteady(const std::vector<runtime::ScheduleValidation>& results) {
  for (const runtime::ScheduleValidation& v : results) {
    if (v.ok() && v.measured_spread > runtime::kUnsteadySpread) {
      std::cerr << fmt::format(
          "ppsim: warning: {}: its measured iterations differ by {:.0f}% from fastest to "
          "slowest: the machine was busy with other work, and its timings are unreliable\n",
          v.schedule, 100 * v.measured_spread);
    }
  }
}

// Each schedule's predicted and measured timelines, side by side.
Status write_trace(const std::string& path,
                   const std::vector<runtime::ScheduleValidation>& results) {
  std::vector<TraceRun> runs;
  std::vector<std::string> labels;
  labels.reserve(2 * results.size());
  for (const runtime::ScheduleValidation& v : results) {
    if (!v.ok()) continue;
    labels.push_back(v.schedule + " predicted");
    runs.push_back({labels.back(), &v.predicted});
    labels.push_back(v.schedule + " measured");
    runs.push_back({labels.back(), &v.measured});
  }
  if (Status st = cli::write_output(path, chrome_trace_json(runs)); !st) return st;
  std::cerr << "trace written to " << path << "\n";
  return {};
}

// The runs file `ppsim calibrate` reads: the config, overrides and profile,
// relative to it, and each schedule's predicted and measured actions.
Status write_runs(const Args& args, const std::string& profile_path,
                  const std::vector<runtime::ScheduleValidation>& results) {
  RunsFile runs;
  runs.config = relative_to(args.config_path, args.runs_path);
  runs.sets = args.sets;
  runs.profile = relative_to(profile_path, args.runs_path);
  runs.backend = args.backend;
  for (const runtime::ScheduleValidation& v : results) {
    if (v.ok()) runs.runs.push_back(runtime::run_pair(v, args.options));
  }
  std::ofstream file(args.runs_path, std::ios::binary);
  file << runs_to_json(runs);
  file.close();
  if (!file) return Error{"cannot write " + args.runs_path};
  std::cerr << "runs written to " << args.runs_path << " (for ppsim calibrate)\n";
  return {};
}

// Rank 0's report: the table, warnings and the files asked for.
int report(const Args& args, const std::string& profile_path,
           const std::vector<runtime::ScheduleValidation>& results, bool all_ok) {
  if (args.json_path != "-") print_results(results);
  warn_unsteady(results);
  if (!args.json_path.empty()) {
    const std::string json = results_json(results, profile_path);
    if (Status st = cli::write_output(args.json_path, json); !st) return error_exit(st.message());
  }
  if (!args.trace_path.empty()) {
    if (Status st = write_trace(args.trace_path, results); !st) return error_exit(st.message());
  }
  if (!args.runs_path.empty()) {
    if (Status st = write_runs(args, profile_path, results); !st) {
      return error_exit(st.message());
    }
  }
  return all_ok ? 0 : 1;
}

// The checks on the options that need no config.
Status check_options(const Args& args) {
  if (args.backend != "threads" && args.backend != "cuda") {
    return Error{"--backend: threads or cuda, got '" + args.backend + "'"};
  }
  if (args.backend != "cuda" && args.shared_sms) {
    return Error{"--shared-sms is an option of --backend cuda"};
  }
  if (Status st = runtime::check_counts(args.options); !st) return st;
  return runtime::check_backend_built(args.backend);
}

// The config with its overrides, checked to run here, and the schedules.
Result<Config> load_checked(Args* args) {
  Result<std::vector<ConfigOverride>> overrides = parse_overrides(args->sets);
  if (!overrides) return overrides.error();
  Result<Config> config = load_config(args->config_path, *overrides);
  if (!config) return config;
  if (Status st = check_runnable_model(*config, "ppsim validate"); !st) return Error{st.message()};
  if (Status st = runtime::check_executable(*config, "ppsim validate"); !st) {
    return Error{st.message()};
  }
  Result<std::vector<std::string>> entries = parse_schedule_list(args->schedules);
  if (!entries) return entries.error();
  args->options.schedules = *entries;
  if (Status st = check_cores(config->parallel.pipeline, args->force, true); !st) {
    return Error{st.message()};
  }
  return config;
}

}  // namespace

int tool_main(int argc, char** argv) {
  Args args;
  if (int code = parse_args(argc, argv, &args); code >= 0) return code;
  if (Status st = check_options(args); !st) return error_exit(st.message());
  // Under mpirun, the CUDA backend is a process per GPU (cuda_mpi.h); every
  // rank predicts, runs and meets the same input errors; rank 0 reports.
  Ranks ranks;
#ifdef PPSIM_HAVE_CUDA_MPI
  runtime::MpiSession mpi;
  if (args.backend == "cuda" && runtime::mpi_launched()) {
    if (Status st = mpi.start(&argc, &argv); !st) return error_exit(st.message());
    ranks = {true, mpi.rank()};
  }
#endif
  if (ranks.over_nccl && args.shared_sms) {
    return fail(ranks, "--shared-sms: under mpirun every rank has a GPU");
  }
  // Profiling and running take minutes: a place the results cannot go is
  // said before, not after.
  if (Status st = cli::check_outputs({{"--json", args.json_path},
                                      {"--trace", args.trace_path},
                                      {"--runs-out", args.runs_path}});
      !st) {
    return fail(ranks, st.message());
  }
  Result<Config> config = load_checked(&args);
  if (!config) return fail(ranks, config.error().message);
  const bool scratch_profile = args.profile_path.empty() && ranks.rank != 0;
  if (args.profile_path.empty()) {
    Result<std::string> path = profile_now(*config, args, ranks);
    if (!path) return fail(ranks, path.error().message);
    args.profile_path = *path;
  }
  config->profile_path = args.profile_path;
  // Over NCCL the transfers are NCCL's, unless the config names a link.
  if (ranks.over_nccl && config->profile_link.empty()) config->profile_link = "nccl";
  use_cuda_runner(args, ranks, &args.options);

  const std::vector<runtime::ScheduleValidation> results = runtime::validate(*config, args.options);
  const bool all_ok = std::all_of(results.begin(), results.end(),
                                  [](const runtime::ScheduleValidation& v) { return v.ok(); });
  if (ranks.rank != 0) {  // rank 0 reports
    if (scratch_profile) std::filesystem::remove(args.profile_path);
    return all_ok ? 0 : 1;
  }
  return report(args, args.profile_path, results, all_ok);
}

int main(int argc, char** argv) {
  return ppsim::guarded_main("ppsim-validate", [&] { return tool_main(argc, argv); });
}
