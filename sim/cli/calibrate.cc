// `ppsim calibrate RUNS...`: fits a calibration to validate's runs files,
// reports it and its held-out error, and writes the calibrated profile.
// `ppsim calibrate --measured MEASURED.csv`: predicts measured runs, and
// with -o fits the hardware's efficiency parameters to them (sim/fit/).
#include "sim/fit/calibrate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/core/json.h"
#include "sim/fit/fit_report.h"
#include "sim/fit/hardware_fit.h"
#include "sim/fit/hardware_preset.h"
#include "sim/fit/measured_runs.h"

namespace po = boost::program_options;

namespace ppsim::cli {
namespace {

// The median of |error| over the held-out runs, before and after.
FitError held_out_error(const std::vector<HeldOutRun>& runs) {
  std::vector<double> before, after;
  for (const HeldOutRun& r : runs) {
    before.push_back(std::abs(r.before_error()));
    after.push_back(std::abs(r.after_error()));
  }
  return {median(std::move(before)), median(std::move(after))};
}

// "gpipe", or "runs-a.json: gpipe" when the runs come from several files.
std::string run_label(const HeldOutRun& r, bool several_files) {
  if (!several_files) return r.schedule;
  return std::filesystem::path(r.source).filename().string() + ": " + r.schedule;
}

std::string report(const CalibrationResult& result, const std::vector<std::string>& sources) {
  std::string out = fmt::format("fitted on {} run{} from {}\n\n", result.runs,
                                result.runs == 1 ? "" : "s", fmt::join(sources, ", "));
  out += fmt::format("{:<5} {:>8} {:>9} {:>12}   {:>9} {:>9}  (median |error| per action)\n",
                     "kind", "actions", "scale", "overhead", "before", "after");
  bool held = false;
  for (const KindFit& k : result.fit.kinds) {
    out += fmt::format("{:<5} {:>8} {:>9.4f} {:>9.2f} us{:1} {:>8.1f}% {:>8.1f}%\n",
                       action_kind_letter(k.kind), k.samples, k.fit.scale, 1e6 * k.fit.overhead_s,
                       k.overhead_fitted ? "" : "*", 100 * k.error.before, 100 * k.error.after);
    held = held || !k.overhead_fitted;
  }
  if (const std::optional<LinkFitResult>& link = result.fit.link) {
    out += fmt::format(
        "link: {} transfers, latency {:.2f} us{}, bandwidth {:.4g} GB/s; median |error| per "
        "transfer {:.1f}% before, {:.1f}% after\n",
        link->samples, 1e6 * link->fit.latency_s, link->latency_fitted ? "" : "*",
        link->fit.bandwidth_Bps / 1e9, 100 * link->error.before, 100 * link->error.after);
    held = held || !link->latency_fitted;
  }
  if (held) {
    out += fmt::format(
        "* held at 0: the predicted durations (transfer sizes) spread less than {}x, too little "
        "to tell it from the scale, or it did not predict runs left out of the fit better\n",
        kMinSpread);
  }
  if (result.held_out.empty()) {
    return out + "\nno held-out error: cross-validation needs two runs or more\n";
  }
  const bool several = sources.size() > 1;
  size_t width = 8;
  for (const HeldOutRun& r : result.held_out) width = std::max(width, run_label(r, several).size());
  out += "\nheld out (each run predicted with the fit on the others), iteration time:\n";
  out += fmt::format("{:<{}} {:>11} {:>11} {:>8} {:>11} {:>8}\n", "schedule", width, "measured",
                     "before", "error", "after", "error");
  for (const HeldOutRun& r : result.held_out) {
    out += fmt::format("{:<{}} {:>8.1f} ms {:>8.1f} ms {:>7.1f}% {:>8.1f} ms {:>7.1f}%\n",
                       run_label(r, several), width, 1e3 * r.measured_s, 1e3 * r.before_s,
                       100 * r.before_error(), 1e3 * r.after_s, 100 * r.after_error());
  }
  const FitError total = held_out_error(result.held_out);
  out += fmt::format("{:<{}} {:>11} {:>11} {:>7.1f}% {:>11} {:>7.1f}%\n", "median |error|", width,
                     "", "", 100 * total.before, "", 100 * total.after);
  return out;
}

void write_kind(JsonWriter& w, const KindCalibration& k) {
  w.begin_object().field("scale", k.scale).field("overhead_s", k.overhead_s).end_object();
}

std::string result_json(const CalibrationResult& result, const std::vector<std::string>& sources,
                        const std::string& output) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().key("runs_files").begin_array();
  for (const std::string& s : sources) w.value(s);
  w.end_array();
  if (!output.empty()) w.field("profile_written", output);
  // What the written profile holds: the fit after the profile's own calibration.
  w.key("calibration").begin_object();
  for (const auto& [key, entry] : kCalibratedKinds) {
    if (const std::optional<KindCalibration>& k = result.calibration.*entry)
      write_kind(w.key(key), *k);
  }
  if (const std::optional<LinkCalibration>& link = result.calibration.link) {
    w.key("link").begin_object().field("latency_s", link->latency_s);
    w.field("bandwidth_Bps", link->bandwidth_Bps).end_object();
  }
  w.end_object().key("fit").begin_object().key("kinds").begin_array();
  for (const KindFit& k : result.fit.kinds) {
    w.begin_object().field("kind", std::string(1, action_kind_letter(k.kind)));
    w.field("samples", k.samples).field("scale", k.fit.scale);
    w.field("overhead_s", k.fit.overhead_s).field("overhead_fitted", k.overhead_fitted);
    w.field("median_error_before", k.error.before).field("median_error_after", k.error.after);
    w.end_object();
  }
  w.end_array();
  if (const std::optional<LinkFitResult>& link = result.fit.link) {
    w.key("link").begin_object().field("samples", link->samples);
    w.field("latency_s", link->fit.latency_s).field("bandwidth_Bps", link->fit.bandwidth_Bps);
    w.field("latency_fitted", link->latency_fitted);
    w.field("median_error_before", link->error.before);
    w.field("median_error_after", link->error.after).end_object();
  }
  w.end_object().key("held_out").begin_array();
  for (const HeldOutRun& r : result.held_out) {
    w.begin_object().field("runs_file", r.source).field("schedule", r.schedule);
    w.field("measured_iteration_s", r.measured_s).field("before_s", r.before_s);
    w.field("after_s", r.after_s).field("before_error", r.before_error());
    w.field("after_error", r.after_error()).end_object();
  }
  w.end_array();
  if (!result.held_out.empty()) {
    const FitError total = held_out_error(result.held_out);
    w.field("median_abs_error_before", total.before);
    w.field("median_abs_error_after", total.after);
  }
  w.end_object();
  out += '\n';
  return out;
}

// ---- --measured ----

// Progress on stderr once the work has taken a second: redrawn in place on
// a terminal, otherwise a line every tenth; short files stay quiet.
class SlowProgress {
 public:
  SlowProgress() : tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

  void operator()(std::string_view what, size_t done, size_t total) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 1 || total == 0) return;
    const size_t tenth = done * 10 / total;
    if (tty_) {
      std::cerr << fmt::format("\rcalibrate: {} {}/{} ({:.0f} s) ", what, done, total, elapsed);
      if (done == total) std::cerr << "\n";
    } else if (what != last_what_ || tenth > last_tenth_ || done == total) {
      std::cerr << fmt::format("calibrate: {} {}/{} ({:.0f} s)\n", what, done, total, elapsed);
    }
    last_what_ = std::string(what);
    last_tenth_ = tenth;
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::string last_what_;
  size_t last_tenth_ = 0;
};

struct MeasuredArgs {
  std::string measured;
  std::vector<std::string> sets;
  std::string output;
  std::string json_path;
  int threads = 0;
};

const char* const kMeasuredUsage =
    "usage: ppsim calibrate --measured MEASURED.csv [--set KEY.PATH=VALUE]... [-o PRESET.yaml] "
    "[--json FILE|-] [--threads N]\n\n"
    "MEASURED.csv lists configs (paths relative to the CSV's folder) and the iteration times\n"
    "measured for them: columns config, iteration_time_s, and optionally label and source.\n"
    "Without -o, prints each row's predicted and measured iteration time and the error,\n"
    "(predicted - measured) / measured. With -o, fits the hardware's efficiency parameters\n"
    "(GEMM, memory, launch, collectives, FlashAttention) to every row by bounded least\n"
    "squares on the relative errors, says which ones the rows could not determine (those keep\n"
    "their preset values), reports each row's error before, fitted and held out of the fit\n"
    "(leave-one-out), and writes the rows' hardware with the fitted values as a preset that\n"
    "configs name with hardware.preset: PRESET.yaml. All rows must share one hardware (but\n"
    "gpus_per_node and nodes). --set changes every row's config alike (what if the cluster\n"
    "had ...?). docs/calibration.md, \"Measured runs\".\n\n"
    "examples:\n"
    "  ppsim calibrate --measured cluster-runs.csv\n"
    "  ppsim calibrate --measured cluster-runs.csv --set hardware.action_overhead_us=500\n"
    "  ppsim calibrate --measured cluster-runs.csv -o my-cluster.yaml\n\n";

// Parses the --measured form: -1 to go on, else the exit code.
int parse_measured_args(const std::vector<std::string>& args, MeasuredArgs* out) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "measured", po::value(&out->measured)->value_name("CSV"),
      "the measured runs: config, iteration_time_s[, label, source]")(
      "set", po::value(&out->sets)->composing()->value_name("KEY.PATH=VALUE"),
      "override one value in every row's config, e.g. --set hardware.hbm_efficiency=0.7 "
      "(repeatable)")(
      "output,o", po::value(&out->output)->value_name("PRESET.yaml"),
      "fit the hardware's efficiency parameters and write them as a hardware preset")(
      "json", po::value(&out->json_path)->value_name("FILE|-"),
      "write the results as JSON to FILE, or to stdout for '-'")(
      "threads",
      po::value(&out->threads)->value_name("N")->notifier(within("--threads", 1, kMaxThreads)),
      "simulation threads (default: one per core); results do not depend on it");
  if (int code = parse_flags(args, desc, kMeasuredUsage, "ppsim calibrate --measured --help");
      code >= 0) {
    return code;
  }
  if (out->measured.empty()) {
    std::cerr << "ppsim: error: --measured needs a CSV file. See 'ppsim calibrate --help'.\n";
    return 2;
  }
  return -1;
}

// Whether `flag` (or `flag=VALUE`) is among the arguments: the form of
// calibrate they ask for.
bool has_flag(const std::vector<std::string>& args, std::string_view flag) {
  return std::any_of(args.begin(), args.end(),
                     [&](const std::string& a) { return a.starts_with(flag); });
}

int predict_measured(const MeasuredArgs& args, const MeasuredRuns& runs,
                     const std::vector<Config>& configs) {
  SlowProgress progress;
  const Result<std::vector<RowPrediction>> rows =
      predict_runs(runs, configs, args.threads,
                   [&](size_t done, size_t total) { progress("predicting rows", done, total); });
  if (!rows.ok()) return error_exit(rows.error().message);
  if (args.json_path != "-") std::cout << format_predictions(runs, *rows);
  if (!args.json_path.empty()) {
    if (Status st = write_output(args.json_path, predictions_json(runs, *rows)); !st) {
      return error_exit(st.message());
    }
  }
  return 0;
}

int fit_measured(const MeasuredArgs& args, const MeasuredRuns& runs,
                 const std::vector<Config>& configs) {
  if (Status st = check_fit_rows(runs, configs); !st) return error_exit(st.message());
  SlowProgress progress;
  HardwareFitOptions options;
  options.threads = args.threads;
  options.progress = std::ref(progress);
  const Result<HardwareFitResult> fit = fit_hardware(runs, configs, options);
  if (!fit.ok()) return error_exit(fit.error().message);
  const std::string name = std::filesystem::path(args.output).stem().string();
  const std::string yaml = hardware_preset_yaml(*fit, name, {runs.path, utc_date()});
  if (Status st = write_output(args.output, yaml); !st) return error_exit(st.message());
  if (args.json_path != "-") {
    std::cout << format_hardware_fit(runs, *fit) << "\nhardware preset written to " << args.output
              << "\n";
  }
  if (!args.json_path.empty()) {
    if (Status st = write_output(args.json_path, hardware_fit_json(runs, *fit, args.output)); !st) {
      return error_exit(st.message());
    }
  }
  return 0;
}

int run_calibrate_measured(const std::vector<std::string>& args) {
  MeasuredArgs parsed;
  if (int code = parse_measured_args(args, &parsed); code >= 0) return code;
  Result<MeasuredRuns> runs = load_measured_runs(parsed.measured);
  if (!runs.ok()) return error_exit(runs.error().message);
  Result<std::vector<ConfigOverride>> overrides = parse_overrides(parsed.sets);
  if (!overrides.ok()) return error_exit(overrides.error().message);
  Result<std::vector<Config>> configs = load_run_configs(*runs, *overrides);
  if (!configs.ok()) return error_exit(configs.error().message);
  if (parsed.output.empty()) return predict_measured(parsed, *runs, *configs);
  return fit_measured(parsed, *runs, *configs);
}

}  // namespace

int run_calibrate(const std::vector<std::string>& args) {
  if (has_flag(args, "--measured")) return run_calibrate_measured(args);
  if (has_flag(args, "--gemms")) return run_calibrate_gemms(args);
  if (has_flag(args, "--memory")) return run_calibrate_memory(args);
  std::vector<std::string> sources;
  std::string output;
  std::string json_path;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&sources)->value_name("RUNS"),
      "runs files of ppsim validate --runs-out (positional, one or more)")(
      "output,o", po::value(&output)->value_name("FILE"),
      "write the runs' profile with the fitted calibration section to FILE")(
      "json", po::value(&json_path)->value_name("FILE|-"),
      "write the fit and the held-out errors as JSON to FILE, or to stdout for '-'");
  const std::string usage =
      "usage: ppsim calibrate RUNS... [-o FILE] [--json FILE|-]\n"
      "       ppsim calibrate --measured MEASURED.csv [-o PRESET.yaml] [--json FILE|-]\n"
      "         (measured iteration times: 'ppsim calibrate --measured --help')\n"
      "       ppsim calibrate --gemms GEMMS.csv --hardware PRESET\n"
      "         (GEMM timings: 'ppsim calibrate --gemms --help')\n"
      "       ppsim calibrate --memory MEMORY.csv --hardware PRESET\n"
      "         (memory-bound kernels' timings: 'ppsim calibrate --memory --help')\n\n"
      "Fits, by non-negative least squares, a scale and a fixed overhead per action kind\n"
      "(F, B, I, W, and S, the optimizer step) and the link's latency and bandwidth to runs\n"
      "that ppsim validate both predicted and measured (--runs-out). Reports each run's\n"
      "iteration-time error before and after calibration, with the run held out of the fit\n"
      "(leave-one-run-out), and writes the profile the runs were predicted from with the fit\n"
      "as its calibration section, for simulate (costs.profile) and validate (--profile) to\n"
      "apply. docs/calibration.md.\n\n"
      "example:\n"
      "  ppsim validate configs/validate/cpu-small.yaml --runs-out runs.json\n"
      "  ppsim calibrate runs.json -o calibrated.yaml\n\n";
  po::variables_map vm;
  if (int code = parse_command_line(args, desc, "calibrate", usage, &vm, -1, "RUNS"); code >= 0) {
    return code;
  }
  std::vector<RunsFile> files;
  for (const std::string& source : sources) {
    Result<RunsFile> runs = load_runs(source);
    if (!runs.ok()) return error_exit(runs.error().message);
    files.push_back(std::move(*runs));
  }
  const Result<CalibrationResult> result = calibrate(files, sources);
  if (!result.ok()) return error_exit(result.error().message);
  if (!output.empty()) {
    if (Status st = write_output(output, profile_to_yaml(result->profile)); !st) {
      return error_exit(st.message());
    }
  }
  if (json_path != "-") {
    std::cout << report(*result, sources);
    if (!output.empty()) std::cout << "\ncalibrated profile written to " << output << "\n";
  }
  if (!json_path.empty()) {
    if (Status st = write_output(json_path, result_json(*result, sources, output)); !st) {
      return error_exit(st.message());
    }
  }
  return 0;
}

}  // namespace ppsim::cli
