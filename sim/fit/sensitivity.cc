#include "sim/fit/sensitivity.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/core/json.h"
#include "sim/fit/measured_runs.h"

namespace ppsim {
namespace {

// The config with one hardware parameter set to `value`.
Config with_value(const Config& config, const FitParameter& parameter, double value) {
  Config probed = config;
  (*probed.hardware).*parameter.member = value;
  return probed;
}

}  // namespace

Result<Sensitivity> hardware_sensitivity(const Config& config, int threads) {
  if (!config.model || !config.hardware || !config.profile_path.empty()) {
    return Error{fmt::format(
        "{}: --sensitivity moves the analytic model's hardware figures, which needs `model` "
        "and `hardware` and no `costs.profile` (a profile's times are measured, not priced)",
        config.source)};
  }
  // The config itself first, then each parameter below and above it.
  std::vector<Config> configs{config};
  Sensitivity out;
  for (const FitParameter& p : kFitParameters) {
    const double value = (*config.hardware).*p.member;
    const double step = kProbeFraction * p.range();
    ParameterProbe probe{
        &p, value, std::max(p.lower, value - step), std::min(p.upper, value + step), 0, 0};
    configs.push_back(with_value(config, p, probe.lower));
    configs.push_back(with_value(config, p, probe.upper));
    out.probes.push_back(probe);
  }
  const auto name = [&](size_t i) {
    if (i == 0) return config.source;
    const ParameterProbe& probe = out.probes[(i - 1) / 2];
    return fmt::format("{} (with {} {:.6g})", config.source, probe.parameter->name,
                       i % 2 == 1 ? probe.lower : probe.upper);
  };
  Result<std::vector<double>> times = predict_iteration_times(configs, threads, name);
  if (!times.ok()) return times.error();
  out.iteration_time_s = (*times)[0];
  for (size_t j = 0; j < out.probes.size(); ++j) {
    out.probes[j].lower_time_s = (*times)[1 + 2 * j];
    out.probes[j].upper_time_s = (*times)[2 + 2 * j];
  }
  return out;
}

std::string format_sensitivity(const Sensitivity& s) {
  std::string out = fmt::format(
      "\nsensitivity: each hardware efficiency parameter moved by a tenth of its range, the others "
      "held (iteration {:.4g} s)\n{:<34} {:>9}  {:>9} {:>11} {:>8}  {:>9} {:>11} {:>8}\n",
      s.iteration_time_s, "parameter", "value", "down to", "iteration", "change", "up to",
      "iteration", "change");
  const auto side = [&](double value, double probed, double time_s) {
    if (probed == value) return fmt::format("  {:>9} {:>11} {:>8}", "at bound", "", "");
    return fmt::format("  {:>9.4g} {:>9.4g} s {:>+7.1f}%", probed, time_s,
                       100 * relative_error(time_s, s.iteration_time_s));
  };
  for (const ParameterProbe& p : s.probes) {
    out += fmt::format("{:<34} {:>9.4g}", p.parameter->name, p.value);
    out += side(p.value, p.lower, p.lower_time_s);
    out += side(p.value, p.upper, p.upper_time_s);
    out += '\n';
  }
  return out;
}

void write_sensitivity(JsonWriter& w, const Sensitivity& s) {
  w.begin_object().field("iteration_time_s", s.iteration_time_s);
  w.key("parameters").begin_array();
  for (const ParameterProbe& p : s.probes) {
    w.begin_object().field("name", p.parameter->name).field("value", p.value);
    w.field("lower", p.lower).field("lower_iteration_time_s", p.lower_time_s);
    w.field("upper", p.upper).field("upper_iteration_time_s", p.upper_time_s);
    w.end_object();
  }
  w.end_array().end_object();
}

}  // namespace ppsim
