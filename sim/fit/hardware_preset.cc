#include "sim/fit/hardware_preset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "sim/config/config.h"

namespace ppsim {
namespace {

// A YAML scalar for a name: plain when it is safe, else double-quoted.
std::string yaml_string(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (plain) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

const ParameterResult* fit_of(const HardwareFitResult& fit, const char* key) {
  for (const ParameterResult& p : fit.parameters) {
    if (std::string_view(p.parameter->name) == key) return &p;
  }
  return nullptr;
}

std::string percent(double fraction) { return fmt::format("{:.1f} %", 100 * fraction); }

std::string header(const HardwareFitResult& fit, const PresetProvenance& provenance) {
  std::string out = fmt::format(
      "# Hardware preset fitted by ppsim calibrate --measured {} on {}\n"
      "# from {} rows of measured iteration times, starting from the rows' hardware \"{}\".\n",
      provenance.measured_path, provenance.date, fit.rows.size(), fit.hardware.name);
  out += fmt::format(
      "# Mean |error| of the iteration time, (predicted - measured) / measured: {} with the\n"
      "# preset, {} fitted",
      percent(fit.before.mean_abs), percent(fit.fitted.mean_abs));
  if (fit.held_out)
    out += fmt::format(", {} held out (leave-one-out)", percent(fit.held_out->mean_abs));
  out += ".\n";
  return out +
         "# gpus_per_node and nodes belong to each config: hardware: {preset: THIS_FILE.yaml,\n"
         "# gpus_per_node: 8, nodes: 1}. docs/calibration.md, \"Measured runs\".\n";
}

// The comment above a field of kFitParameters.
std::string parameter_comment(const ParameterResult& p, size_t rows,
                              const PresetProvenance& provenance) {
  switch (p.status) {
    case ParameterStatus::kFitted:
      return fmt::format(
          "# fitted by ppsim calibrate --measured {} on {} from {} rows; preset value {}\n",
          provenance.measured_path, provenance.date, rows, p.preset);
    case ParameterStatus::kInsensitive:
      return fmt::format(
          "# not fitted: a tenth of its range moves no row's prediction by more than {:g} %\n",
          100 * kMinRowChange);
    case ParameterStatus::kCollinear:
      return fmt::format("# not fitted: the rows cannot tell it from {}\n",
                         fmt::join(p.collinear_with, ", "));
    case ParameterStatus::kUndetermined:
      return fmt::format(
          "# not fitted: {:g} % noise in the rows could move it over {:.0f} % of its range\n",
          100 * kRowNoise, 100 * p.noise_spread);
  }
  return "";
}

}  // namespace

std::optional<std::string> hardware_difference(const HardwareSpec& a, const HardwareSpec& b) {
  if (a.name != b.name) return fmt::format("name ({} and {})", a.name, b.name);
  for (const HardwarePresetNumber& n : hardware_preset_numbers()) {
    if (a.*n.member != b.*n.member) {
      return fmt::format("{} ({} and {})", n.key, a.*n.member, b.*n.member);
    }
  }
  for (const HardwarePresetInteger& n : hardware_preset_integers()) {
    if (a.*n.member != b.*n.member) {
      return fmt::format("{} ({} and {})", n.key, a.*n.member, b.*n.member);
    }
  }
  return std::nullopt;
}

std::string hardware_preset_yaml(const HardwareFitResult& fit, std::string_view name,
                                 const PresetProvenance& provenance) {
  std::string out = header(fit, provenance);
  out += fmt::format("name: {}\n", yaml_string(std::string(name)));
  for (const HardwarePresetNumber& n : hardware_preset_numbers()) {
    const double value = fit.hardware.*n.member;
    const ParameterResult* p = fit_of(fit, n.key);
    if (p == nullptr) {
      out += fmt::format("{}: {}\n", n.key, value);
      continue;
    }
    out += parameter_comment(*p, fit.rows.size(), provenance);
    if (p->status == ParameterStatus::kFitted) {
      out += fmt::format("{}: {:.6g}\n", n.key, value);
    } else {
      out += fmt::format("{}: {}\n", n.key, value);
    }
  }
  for (const HardwarePresetInteger& n : hardware_preset_integers()) {
    out += fmt::format("{}: {}\n", n.key, fit.hardware.*n.member);
  }
  return out;
}

}  // namespace ppsim
