// `ppsim calibrate RUNS...`: fits a calibration to validate's runs files,
// reports it and its held-out error, and writes the calibrated profile.
#include "sim/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/json.h"

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

}  // namespace

int run_calibrate(const std::vector<std::string>& args) {
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
      "usage: ppsim calibrate RUNS... [-o FILE] [--json FILE|-]\n\n"
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
    if (!runs.ok()) return fail(runs.error().message);
    files.push_back(std::move(*runs));
  }
  const Result<CalibrationResult> result = calibrate(files, sources);
  if (!result.ok()) return fail(result.error().message);
  if (!output.empty()) {
    if (Status st = write_output(output, profile_to_yaml(result->profile)); !st) {
      return fail(st.message());
    }
  }
  if (json_path != "-") {
    std::cout << report(*result, sources);
    if (!output.empty()) std::cout << "\ncalibrated profile written to " << output << "\n";
  }
  if (!json_path.empty()) {
    if (Status st = write_output(json_path, result_json(*result, sources, output)); !st) {
      return fail(st.message());
    }
  }
  return 0;
}

}  // namespace ppsim::cli
