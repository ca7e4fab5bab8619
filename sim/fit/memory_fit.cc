#include "sim/fit/memory_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "sim/cost/layer_ops.h"
#include "sim/cost/op_time.h"
#include "sim/fit/csv_records.h"
#include "sim/fit/fit_report.h"

namespace ppsim {
namespace {

constexpr double kGiga = 1e9;
constexpr double kMicro = 1e-6;
constexpr double kLargestBytes = 1125899906842624.0;  // 2^50
// The normal equations' determinant, relative to the product of their
// diagonal, below which the two unknowns are not told apart.
constexpr double kSingular = 1e-9;

// The targets of read_row are in this order.
constexpr CsvColumn kColumns[] = {
    {"bytes", true},
    {"seconds", true},
    {"label", false},
    {"source", false},
};

Result<MemoryTiming> read_row(const CsvRecord& record, const std::vector<int>& columns,
                              const std::string& path) {
  Result<MemoryTiming> row = read_csv_record<MemoryTiming>(
      record, columns, path, kColumns, [](MemoryTiming& r, int column) {
        const CsvTarget targets[] = {csv_number(&r.bytes, {kLargestBytes}), csv_number(&r.seconds),
                                     csv_text(&r.label), csv_text(&r.source)};
        return targets[column];
      });
  if (row.ok() && row->label.empty()) row->label = fmt::format("{:g} MiB", row->bytes / (1 << 20));
  return row;
}

std::vector<double> errors_at(const HardwareSpec& hardware, const MemoryTimings& timings) {
  std::vector<double> errors;
  for (const MemoryTiming& row : timings.rows) {
    errors.push_back(relative_error(memory_model_seconds(hardware, row.bytes), row.seconds));
  }
  return errors;
}

// The model's time over the measured one is x b_i + y c_i with x the
// seconds a byte, y the fixed seconds, b_i = bytes_i / t_i and c_i = 1 /
// t_i: the least squares of (x b_i + y c_i - 1).
struct Sums {
  double bb = 0, bc = 0, cc = 0, b = 0, c = 0;
};

Sums sums_of(const MemoryTimings& timings) {
  Sums s;
  for (const MemoryTiming& row : timings.rows) {
    const double b = row.bytes / row.seconds;
    const double c = 1 / row.seconds;
    s.bb += b * b;
    s.bc += b * c;
    s.cc += c * c;
    s.b += b;
    s.c += c;
  }
  return s;
}

// The seconds a byte that fit best with the fixed time `y`, within the
// efficiency's range.
double seconds_per_byte_given(const Sums& s, double y, double bandwidth_Bps) {
  const double x = (s.b - y * s.bc) / s.bb;
  return std::clamp(x, 1 / bandwidth_Bps, 1 / (kMinFittedHbmEfficiency * bandwidth_Bps));
}

// The fixed time that fits best with the seconds a byte `x`, within its
// range.
double fixed_seconds_given(const Sums& s, double x) {
  return std::clamp((s.c - x * s.bc) / s.cc, 0.0, kMaxFittedKernelUs * kMicro);
}

}  // namespace

Result<MemoryTimings> parse_memory_timings(std::string_view text, const std::string& path) {
  return read_csv_table<MemoryTimings, MemoryTiming>(text, path, kColumns, "bytes,seconds,label",
                                                     "timings", read_row);
}

Result<MemoryTimings> load_memory_timings(const std::string& path) {
  return load_csv_file(path, parse_memory_timings);
}

double memory_model_seconds(const HardwareSpec& hardware, double bytes) {
  Op op;
  op.kind = OpKind::kMemory;
  op.bytes = bytes;
  return OpTimer(hardware, DType::kBf16, 1).seconds(op, GroupLinks{});
}

// Both unknowns from the normal equations; a solution outside a range is
// pinned to that bound and the other unknown fitted again, and of the
// candidates the one with the smaller sum of squares is kept.
Result<MemoryFitResult> fit_memory_timings(const HardwareSpec& preset,
                                           const MemoryTimings& timings) {
  if (timings.rows.empty()) return Error{fmt::format("{}: no timings to fit", timings.path)};
  const double bandwidth_Bps = preset.hbm_bandwidth_gbps * kGiga;
  if (!(bandwidth_Bps > 0)) {
    return Error{"the preset has no hbm_bandwidth_gbps to fit its efficiency against"};
  }
  const Sums s = sums_of(timings);
  std::set<double> sizes;
  for (const MemoryTiming& row : timings.rows) sizes.insert(row.bytes);
  // Sizes so close that the normal equations are singular to rounding
  // tell the fixed time no better than one size does.
  const double det = s.bb * s.cc - s.bc * s.bc;
  MemoryFitResult result;
  result.fixed_time_fitted = sizes.size() >= 2 && det > kSingular * s.bb * s.cc;
  double x = 0, y = preset.kernel_launch_us * kMicro;
  if (!result.fixed_time_fitted) {
    x = seconds_per_byte_given(s, y, bandwidth_Bps);
  } else {
    x = seconds_per_byte_given(s, (s.bb * s.c - s.bc * s.b) / det, bandwidth_Bps);
    y = fixed_seconds_given(s, x);
    // Pinning y first can give the other corner; keep the better.
    const double y_pinned = fixed_seconds_given(s, (s.cc * s.b - s.bc * s.c) / det);
    const double x_pinned = seconds_per_byte_given(s, y_pinned, bandwidth_Bps);
    const auto cost = [&](double cx, double cy) {
      return cx * cx * s.bb + cy * cy * s.cc + 2 * cx * cy * s.bc - 2 * cx * s.b - 2 * cy * s.c;
    };
    if (cost(x_pinned, y_pinned) < cost(x, y)) x = x_pinned, y = y_pinned;
  }
  result.hardware = preset;
  result.hardware.hbm_efficiency = 1 / (x * bandwidth_Bps);
  result.hardware.kernel_launch_us = y / kMicro;
  result.before = errors_at(preset, timings);
  result.after = errors_at(result.hardware, timings);
  result.before_summary = summarize_errors(result.before);
  result.after_summary = summarize_errors(result.after);
  return result;
}

std::string format_memory_fit(const MemoryTimings& timings, const HardwareSpec& preset,
                              const MemoryFitResult& fit, std::string_view preset_name,
                              std::string_view date) {
  const HardwareSpec& fitted = fit.hardware;
  std::string out = fmt::format("{:<18} {:>10} {:>10}  status\n", "parameter", "preset", "fitted");
  out += fmt::format("{:<18} {:>10.4g} {:>10.4g}  fitted\n", "hbm_efficiency",
                     preset.hbm_efficiency, fitted.hbm_efficiency);
  out += fmt::format("{:<18} {:>10.4g} {:>10.4g}  {}\n", "kernel_launch_us",
                     preset.kernel_launch_us, fitted.kernel_launch_us,
                     fit.fixed_time_fitted ? "fitted" : "not fitted: one size cannot tell it");
  size_t width = 5;
  for (const MemoryTiming& row : timings.rows) width = std::max(width, row.label.size());
  out += fmt::format("\n{:<{}} {:>12} {:>9} {:>8} {:>8}\n", "label", width, "measured", "GB/s",
                     "preset", "fitted");
  for (size_t i = 0; i < timings.rows.size(); ++i) {
    const MemoryTiming& row = timings.rows[i];
    out += fmt::format("{:<{}} {:>10.4g} s {:>9.1f} {:>8} {:>8}\n", row.label, width, row.seconds,
                       row.bytes / row.seconds / kGiga, signed_percent(fit.before[i]),
                       signed_percent(fit.after[i]));
  }
  std::vector<FittedField> fields = {
      {"hbm_efficiency", preset.hbm_efficiency, fitted.hbm_efficiency}};
  if (fit.fixed_time_fitted) {
    fields.push_back({"kernel_launch_us", preset.kernel_launch_us, fitted.kernel_launch_us});
  }
  return out + format_timings_fit_end("--memory", timings.path, timings.rows.size(),
                                      fit.before_summary, fit.after_summary, preset_name, date,
                                      fields);
}

}  // namespace ppsim
