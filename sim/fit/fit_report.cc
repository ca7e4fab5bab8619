#include "sim/fit/fit_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/core/json.h"
#include "sim/plan/ranking_evidence.h"

namespace ppsim {
namespace {

// One unit for a table's times: seconds when the longest measured time is
// one or more, else milliseconds.
struct TimeUnit {
  double scale;
  const char* name;
};

TimeUnit unit_for(const MeasuredRuns& runs) {
  double longest = 0;
  for (const MeasuredRun& r : runs.runs) longest = std::max(longest, r.iteration_time_s);
  return longest >= 1 ? TimeUnit{1, "s"} : TimeUnit{1e3, "ms"};
}

std::string format_time(double seconds, const TimeUnit& unit) {
  return fmt::format("{:.4g} {}", seconds * unit.scale, unit.name);
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }

size_t label_width(const MeasuredRuns& runs, size_t least) {
  size_t width = least;
  for (const MeasuredRun& r : runs.runs) width = std::max(width, r.label.size());
  return width;
}

void write_summary(JsonWriter& w, const ErrorSummary& s) {
  w.begin_object().field("mean_abs_error", s.mean_abs).field("max_abs_error", s.max_abs);
  w.end_object();
}

void write_row_identity(JsonWriter& w, const MeasuredRun& run) {
  w.field("label", run.label).field("config", run.config).field("line", run.line);
  if (!run.source.empty()) w.field("source", run.source);
  if (!run.group.empty()) w.field("group", run.group);
  if (!run.series.empty()) w.field("series", run.series);
}

// Per series: its line's time per microbatch and constant, measured and
// predicted, and the slope's error; a series of one microbatch count says so.
std::string series_table(const std::vector<SeriesLine>& lines) {
  if (lines.empty()) return "";
  size_t width = 6;
  for (const SeriesLine& l : lines) width = std::max(width, l.series.size());
  std::string out = fmt::format(
      "\nper microbatch and constant (a least-squares line in the microbatch count per "
      "series):\n{:<{}} {:>4} {:>12} {:>12} {:>8} {:>10} {:>10}\n",
      "series", width, "rows", "measured/mb", "predicted/mb", "error", "measured+", "predicted+");
  for (const SeriesLine& l : lines) {
    if (l.counts < 2) {
      out += fmt::format("{:<{}} {:>4} one microbatch count: no line\n", l.series, width, l.rows);
      continue;
    }
    out += fmt::format(
        "{:<{}} {:>4} {:>9.2f} ms {:>9.2f} ms {:>8} {:>8.3f} s {:>8.3f} s\n", l.series, width,
        l.rows, 1e3 * l.measured_per_microbatch_s, 1e3 * l.predicted_per_microbatch_s,
        signed_percent(relative_error(l.predicted_per_microbatch_s, l.measured_per_microbatch_s)),
        l.measured_constant_s, l.predicted_constant_s);
  }
  return out;
}

std::string parameter_status_text(const ParameterResult& p) {
  switch (p.status) {
    case ParameterStatus::kFitted:
      return p.at_bound ? "fitted, held at a bound" : "fitted";
    case ParameterStatus::kInsensitive:
      return fmt::format("not fitted: insensitive (rows move {:.2f}% at most)",
                         100 * p.largest_row_change);
    case ParameterStatus::kCollinear:
      return fmt::format("not fitted: collinear with {}", fmt::join(p.collinear_with, ", "));
    case ParameterStatus::kUndetermined:
      return fmt::format("not fitted: {:g}% noise in the rows could move it {:.0f}% of its range",
                         100 * kRowNoise, 100 * p.noise_spread);
  }
  return "";
}

std::string parameter_table(const HardwareFitResult& fit) {
  std::string out = fmt::format("{:<34} {:>9} {:>10} {:>12}  {:<11} {}\n", "parameter", "preset",
                                "value", "std. error", "bounds", "status");
  for (const ParameterResult& p : fit.parameters) {
    const std::string error =
        p.standard_error ? fmt::format("+/- {:.3g}", *p.standard_error) : std::string();
    out += fmt::format("{:<34} {:>9.4g} {:>10.4g} {:>12}  {:<11} {}\n", p.parameter->name, p.preset,
                       p.value, error,
                       fmt::format("[{:g}, {:g}]", p.parameter->lower, p.parameter->upper),
                       parameter_status_text(p));
  }
  return out +
         fmt::format(
             "Not fitted, and kept at its preset value: a parameter a tenth of whose range moves\n"
             "no row's prediction by more than {:g}% (insensitive), whose effect the rows cannot\n"
             "tell from the others' (collinear: the Jacobian with unit columns has a singular\n"
             "value below {:g}), or that {:g}% noise in each row could move over {:g}% of its\n"
             "range (undetermined).\n",
             100 * kMinRowChange, kMinSingularValue, 100 * kRowNoise, 100 * kMaxNoiseSpread);
}

std::string row_table(const MeasuredRuns& runs, const HardwareFitResult& fit) {
  const TimeUnit unit = unit_for(runs);
  const size_t width = label_width(runs, 12);
  std::string out = fmt::format(
      "iteration time; error = (predicted - measured) / measured; held out: fitted on the other "
      "rows\n{:<{}} {:>12} {:>8} {:>8} {:>9}\n",
      "label", width, "measured", "before", "fitted", "held out");
  for (const RowResult& r : fit.rows) {
    const std::optional<double> held = r.held_out_error();
    out += fmt::format("{:<{}} {:>12} {:>8} {:>8} {:>9}\n", r.run->label, width,
                       format_time(r.measured_s(), unit), signed_percent(r.before_error()),
                       signed_percent(r.fitted_error()), held ? signed_percent(*held) : "-");
  }
  const auto line = [&](const char* what, auto get) {
    return fmt::format("{:<{}} {:>12} {:>8} {:>8} {:>9}\n", what, width, "",
                       percent(get(fit.before)), percent(get(fit.fitted)),
                       fit.held_out ? percent(get(*fit.held_out)) : "-");
  };
  out += line("mean |error|", [](const ErrorSummary& s) { return s.mean_abs; });
  out += line("max |error|", [](const ErrorSummary& s) { return s.max_abs; });
  return out;
}

}  // namespace

std::string format_predictions(const MeasuredRuns& runs, const std::vector<RowPrediction>& rows) {
  const TimeUnit unit = unit_for(runs);
  const size_t width = label_width(runs, 5);
  std::string out =
      fmt::format("{:<{}} {:>12} {:>12} {:>8}\n", "label", width, "predicted", "measured", "error");
  std::vector<double> errors;
  for (const RowPrediction& r : rows) {
    out += fmt::format("{:<{}} {:>12} {:>12} {:>8}\n", r.run->label, width,
                       format_time(r.predicted_s, unit), format_time(r.run->iteration_time_s, unit),
                       signed_percent(r.error()));
    errors.push_back(r.error());
  }
  const ErrorSummary s = summarize_errors(errors);
  out += fmt::format(
      "{} rows: mean |error| {}, max |error| {}; error = (predicted - measured) / measured\n",
      rows.size(), percent(s.mean_abs), percent(s.max_abs));
  const OrderAgreement order = order_agreement(rows);
  if (order.groups > 0) {
    out += fmt::format(
        "order within groups: {} of {} pairs ordered as measured ({}); {} of {} groups "
        "entirely in the measured order\n",
        order.concordant, order.pairs,
        order.pairs > 0 ? percent(static_cast<double>(order.concordant) / order.pairs)
                        : std::string("-"),
        order.groups_in_order, order.groups);
    out += fmt::format(
        "  pairs predicted less than {} apart: {} of {} in order; {} or more apart: {} of {}\n",
        percent(kRankingEvidence.close_gap), order.close_concordant, order.close_pairs,
        percent(kRankingEvidence.close_gap), order.concordant - order.close_concordant,
        order.pairs - order.close_pairs);
  }
  return out + series_table(series_lines(rows));
}

std::string predictions_json(const MeasuredRuns& runs, const std::vector<RowPrediction>& rows) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().field("measured_runs", runs.path).key("rows").begin_array();
  std::vector<double> errors;
  for (const RowPrediction& r : rows) {
    w.begin_object();
    write_row_identity(w, *r.run);
    w.field("measured_s", r.run->iteration_time_s).field("predicted_s", r.predicted_s);
    w.field("error", r.error()).end_object();
    errors.push_back(r.error());
  }
  const ErrorSummary s = summarize_errors(errors);
  w.end_array().field("mean_abs_error", s.mean_abs).field("max_abs_error", s.max_abs);
  const OrderAgreement order = order_agreement(rows);
  if (order.groups > 0) {
    w.key("order").begin_object().field("groups", order.groups);
    w.field("groups_in_order", order.groups_in_order).field("pairs", order.pairs);
    w.field("concordant_pairs", order.concordant).field("close_gap", kRankingEvidence.close_gap);
    w.field("close_pairs", order.close_pairs);
    w.field("close_concordant_pairs", order.close_concordant).end_object();
  }
  const std::vector<SeriesLine> lines = series_lines(rows);
  if (!lines.empty()) {
    w.key("series").begin_array();
    for (const SeriesLine& l : lines) {
      w.begin_object().field("series", l.series).field("rows", l.rows);
      w.field("microbatch_counts", l.counts);
      if (l.counts >= 2) {
        w.field("measured_per_microbatch_s", l.measured_per_microbatch_s);
        w.field("predicted_per_microbatch_s", l.predicted_per_microbatch_s);
        w.field("measured_constant_s", l.measured_constant_s);
        w.field("predicted_constant_s", l.predicted_constant_s);
      }
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
  return out + "\n";
}

std::string format_hardware_fit(const MeasuredRuns& runs, const HardwareFitResult& fit) {
  const auto fitted =
      std::count_if(fit.parameters.begin(), fit.parameters.end(),
                    [](const ParameterResult& p) { return p.status == ParameterStatus::kFitted; });
  std::string out = fmt::format(
      "fitted {} of {} hardware parameters to the {} rows of {} (Levenberg-Marquardt, {} "
      "iteration{}, {})\n\n",
      fitted, fit.parameters.size(), fit.rows.size(), runs.path, fit.iterations,
      fit.iterations == 1 ? "" : "s", fit.converged ? "converged" : "not converged");
  return out + parameter_table(fit) + "\n" + row_table(runs, fit);
}

std::string hardware_fit_json(const MeasuredRuns& runs, const HardwareFitResult& fit,
                              const std::string& preset_written) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().field("measured_runs", runs.path);
  if (!preset_written.empty()) w.field("preset_written", preset_written);
  w.field("iterations", fit.iterations).field("converged", fit.converged);
  w.key("parameters").begin_array();
  for (const ParameterResult& p : fit.parameters) {
    w.begin_object().field("name", p.parameter->name).field("status", to_string(p.status));
    w.field("preset", p.preset).field("value", p.value);
    w.field("lower", p.parameter->lower).field("upper", p.parameter->upper);
    w.field("largest_row_change", p.largest_row_change).field("noise_spread", p.noise_spread);
    w.field("standard_error", p.standard_error).field("at_bound", p.at_bound);
    w.key("collinear_with").begin_array();
    for (const std::string& other : p.collinear_with) w.value(other);
    w.end_array().end_object();
  }
  w.end_array().key("rows").begin_array();
  for (const RowResult& r : fit.rows) {
    w.begin_object();
    write_row_identity(w, *r.run);
    w.field("measured_s", r.measured_s()).field("before_s", r.before_s);
    w.field("fitted_s", r.fitted_s).field("held_out_s", r.held_out_s);
    w.field("before_error", r.before_error()).field("fitted_error", r.fitted_error());
    w.field("held_out_error", r.held_out_error()).end_object();
  }
  w.end_array();
  write_summary(w.key("before"), fit.before);
  write_summary(w.key("fitted"), fit.fitted);
  if (fit.held_out) write_summary(w.key("held_out"), *fit.held_out);
  w.end_object();
  return out + "\n";
}

std::string signed_percent(double fraction) { return fmt::format("{:+.1f}%", 100 * fraction); }

std::string format_timings_fit_end(std::string_view flag, const std::string& csv, size_t rows,
                                   const ErrorSummary& before, const ErrorSummary& after,
                                   std::string_view preset, std::string_view date,
                                   const std::vector<FittedField>& fields) {
  std::string out = fmt::format(
      "{} timings: mean |error| {:.1f}% with the preset, {:.1f}% fitted; max {:.1f}% and "
      "{:.1f}%; error = (model - measured) / measured\n",
      rows, 100 * before.mean_abs, 100 * after.mean_abs, 100 * before.max_abs, 100 * after.max_abs);
  out += "\n# for a hardware preset file:\n";
  for (const FittedField& f : fields) {
    out += fmt::format(
        "# Fit by ppsim calibrate {} {} --hardware {} on {} ({} timings); preset value "
        "{:g}.\n{}: {:.4g}\n",
        flag, csv, preset, date, rows, f.preset, f.name, f.value);
  }
  return out;
}

}  // namespace ppsim
