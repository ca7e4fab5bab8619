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

}  // namespace

int tool_main(int argc, char** argv) {
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
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&config_path)->value_name("CONFIG"), "YAML config (positional)")(
      "schedules", po::value(&schedules)->value_name("LIST"),
      "compare-style list (KIND or KIND:N); default: the synchronous kinds")(
      "profile", po::value(&profile_path)->value_name("FILE"),
      "use this cost profile instead of profiling now")(
      "warmup", po::value(&options.warmup)->value_name("N"), "unmeasured iterations (1)")(
      "iterations", po::value(&options.iterations)->value_name("N"), "measured iterations (3)")(
      "repetitions", po::value(&repetitions)->value_name("N"), "profiler repetitions (5)")(
      "json", po::value(&json_path)->value_name("FILE|-"), "results as JSON")(
      "trace", po::value(&trace_path)->value_name("FILE"),
      "Chrome trace with the predicted and measured timelines of each schedule")(
      "runs-out", po::value(&runs_path)->value_name("FILE"),
      "save each schedule's predicted and measured actions and transfers for ppsim calibrate "
      "(JSON; a profile taken now is saved beside it)")("force", po::bool_switch(&force),
                                                        "run even with more ranks than cores")(
      "backend", po::value(&backend)->value_name("threads|cuda"),
      "threads (this CPU, one thread per rank), or cuda (every rank on GPU 0)")(
      "shared-sms", po::bool_switch(&shared_sms),
      "cuda: ranks share every SM (plain streams), profiled on the whole GPU")(
      "set", po::value(&sets)->composing()->value_name("KEY.PATH=VALUE"), "override a value");
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
  if (int code = ppsim::cli::parse_command_line(std::vector<std::string>(argv + 1, argv + argc),
                                                desc, "ppsim validate", usage, &vm);
      code >= 0) {
    return code;
  }
  if (backend != "threads" && backend != "cuda") {
    return error_exit("--backend: threads or cuda, got '" + backend + "'");
  }
  if (backend != "cuda" && shared_sms)
    return error_exit("--shared-sms is an option of --backend cuda");
  if (Status st = runtime::check_backend_built(backend); !st) return error_exit(st.message());
  const bool cuda = backend == "cuda";
  // Under mpirun, the CUDA backend is a process per GPU (cuda_mpi.h); every
  // rank predicts, runs and meets the same input errors; rank 0 reports.
  bool over_nccl = false;
  int rank = 0;
#ifdef PPSIM_HAVE_CUDA_MPI
  runtime::MpiSession mpi;
  if (cuda && runtime::mpi_launched()) {
    if (Status st = mpi.start(&argc, &argv); !st) return error_exit(st.message());
    over_nccl = true;
    rank = mpi.rank();
  }
#endif
  const auto error_once = [&](const std::string& message) {
    return rank == 0 ? cli::error_exit(message) : 1;
  };
  if (over_nccl && shared_sms) return error_once("--shared-sms: under mpirun every rank has a GPU");
  // Profiling and running take minutes: a place the results cannot go is
  // said before, not after.
  for (const auto& [flag, path] : {std::pair<std::string, std::string>{"--json", json_path},
                                   {"--trace", trace_path},
                                   {"--runs-out", runs_path}}) {
    if (path.empty() || path == "-") continue;
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir)) {
      return error_once(fmt::format("{} {}: there is no directory {}", flag, path, dir.string()));
    }
  }
  Result<std::vector<ConfigOverride>> overrides = parse_overrides(sets);
  if (!overrides) return error_once(overrides.error().message);
  Result<Config> config = load_config(config_path, *overrides);
  if (!config) return error_once(config.error().message);
  if (Status st = check_runnable_model(*config, "ppsim validate"); !st)
    return error_once(st.message());
  Result<std::vector<std::string>> entries = parse_schedule_list(schedules);
  if (!entries) return error_once(entries.error().message);
  options.schedules = *entries;
  if (Status st = check_cores(config->parallel.pipeline, force, true); !st) {
    return error_once(st.message());
  }

  bool scratch_profile = false;  // written here for this rank alone
  if (profile_path.empty()) {
    // Every shape any of the schedules needs (token-level ones need their slices).
    Result<ProfileRequest> request = request_for(*config);
    if (!request) return error_once(request.error().message);
    for (const std::string& entry : options.schedules) {
      Result<ProfileRequest> more = request_for(config_for_entry(*config, entry));
      if (!more) continue;  // validate reports the schedule's own error
      for (const auto& shape : more->shapes) {
        if (std::find(request->shapes.begin(), request->shapes.end(), shape) ==
            request->shapes.end()) {
          request->shapes.push_back(shape);
        }
      }
    }
    request->repetitions = repetitions;
    Result<CostProfile> profile = Error{"not profiled on this rank"};
    if (!cuda) {
      profile = profile_cpu(*request, [](int done, int total) {
        std::cerr << fmt::format("profile: {}/{} measurements\n", done, total);
      });
    } else if (rank == 0) {
#ifdef PPSIM_HAVE_CUDA
      // An error here goes to the other ranks too (below), which wait for it.
      Result<GpuProfileOptions> gpu = gpu_options_for(*config);
      if (gpu) {
        // As each rank will run: on its share of the SMs (over NCCL: a whole GPU).
        if (!shared_sms && !over_nccl) gpu->sm_groups = config->parallel.pipeline;
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
    if (over_nccl) {  // rank 0's profile, or its error, on every rank
      yaml = runtime::mpi_broadcast_text(yaml, 0);
      error = runtime::mpi_broadcast_text(error, 0);
    }
#endif
    if (!error.empty()) return error_once(error);
    // Beside the runs file, which names it; else (and on the other ranks) a
    // scratch file.
    profile_path =
        runs_path.empty() || rank != 0
            ? fmt::format("/tmp/ppsim-validate-{}.profile.yaml", getpid())
            : std::filesystem::path(runs_path).replace_extension(".profile.yaml").string();
    const Status wrote = cli::write_output(profile_path, yaml);
    std::string write_error = wrote ? std::string() : wrote.message();
#ifdef PPSIM_HAVE_CUDA_MPI
    if (over_nccl) write_error = runtime::mpi_first_error(write_error);  // all stop, or none
#endif
    if (!write_error.empty()) return error_once(write_error);
    scratch_profile = rank != 0;
    if (rank == 0) std::cerr << "profile written to " << profile_path << "\n";
  }
  config->profile_path = profile_path;
  // Over NCCL the transfers are NCCL's, unless the config names a link.
  if (over_nccl && config->profile_link.empty()) config->profile_link = "nccl";
#ifdef PPSIM_HAVE_CUDA_MPI
  if (over_nccl) {
    options.run = [rank](const Schedule& schedule, const runtime::RuntimeModel& model,
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
  }
#endif
#ifdef PPSIM_HAVE_CUDA
  if (cuda && !over_nccl) {
    runtime::CudaRunOptions run_options;
    run_options.split_sms = !shared_sms;
    options.run = [run_options](const Schedule& schedule, const runtime::RuntimeModel& model,
                                const runtime::RunSettings& settings) {
      runtime::CudaRunInfo info;
      Result<runtime::RunResult> run =
          runtime::run_cuda(schedule, model, settings, run_options, &info);
      std::cerr << fmt::format("run: {} on {}; {}; timing: {}\n", schedule.name,
                               info.placements.empty() ? "the GPU" : info.placements[0],
                               info.sharing, info.timing);
      return run;
    };
  }
#endif

  const std::vector<runtime::ScheduleValidation> results = runtime::validate(*config, options);
  const bool all_ok = std::all_of(results.begin(), results.end(),
                                  [](const runtime::ScheduleValidation& v) { return v.ok(); });
  if (rank != 0) {  // rank 0 reports
    if (scratch_profile) std::filesystem::remove(profile_path);
    return all_ok ? 0 : 1;
  }
  if (json_path != "-") {
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
  for (const runtime::ScheduleValidation& v : results) {
    if (v.ok() && v.measured_spread > runtime::kUnsteadySpread) {
      std::cerr << fmt::format(
          "ppsim: warning: {}: its measured iterations differ by {:.0f}% from fastest to "
          "slowest: the machine was busy with other work, and its timings are unreliable\n",
          v.schedule, 100 * v.measured_spread);
    }
  }
  if (!json_path.empty()) {
    const std::string json = results_json(results, profile_path);
    if (Status st = cli::write_output(json_path, json); !st) return error_once(st.message());
  }
  if (!trace_path.empty()) {
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
    if (Status st = cli::write_output(trace_path, chrome_trace_json(runs)); !st) {
      return error_once(st.message());
    }
    std::cerr << "trace written to " << trace_path << "\n";
  }
  if (!runs_path.empty()) {
    RunsFile runs;
    runs.config = relative_to(config_path, runs_path);
    runs.sets = sets;
    runs.profile = relative_to(profile_path, runs_path);
    runs.backend = backend;
    for (const runtime::ScheduleValidation& v : results) {
      if (v.ok()) runs.runs.push_back(runtime::run_pair(v, options));
    }
    std::ofstream file(runs_path, std::ios::binary);
    file << runs_to_json(runs);
    file.close();
    if (!file) return error_once("cannot write " + runs_path);
    std::cerr << "runs written to " << runs_path << " (for ppsim calibrate)\n";
  }
  return all_ok ? 0 : 1;
}

int main(int argc, char** argv) {
  return ppsim::guarded_main("ppsim-validate", [&] { return tool_main(argc, argv); });
}
