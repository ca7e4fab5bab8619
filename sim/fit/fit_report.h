// What `ppsim calibrate --measured` prints and writes as JSON: the rows'
// predictions against their measurements, and the hardware fit.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/fit/hardware_fit.h"
#include "sim/fit/measured_runs.h"

namespace ppsim {

// Per row: label, predicted, measured, error; then the mean and max |error|,
// the order within groups and the line of each series (series_lines).
std::string format_predictions(const MeasuredRuns& runs, const std::vector<RowPrediction>& rows);
// {"measured_runs", "rows": [{"label", "config", "line", "source", "group",
// "series", "measured_s", "predicted_s", "error"}], "mean_abs_error",
// "max_abs_error", "order" (with groups), "series": [{"series", "rows",
// "microbatch_counts", "measured_per_microbatch_s", "predicted_per_microbatch_s",
// "measured_constant_s", "predicted_constant_s"}] (with series)}
std::string predictions_json(const MeasuredRuns& runs, const std::vector<RowPrediction>& rows);

// The parameters (preset, fitted, bounds, status and why), then per row the
// error before, fitted and held out, and their mean and max |error|.
std::string format_hardware_fit(const MeasuredRuns& runs, const HardwareFitResult& fit);
// {"measured_runs", "preset_written" (when given), "iterations", "converged",
// "parameters": [{"name", "status", "preset", "value", "lower", "upper",
// "largest_row_change", "standard_error", "at_bound", "collinear_with"}],
// "rows": [{"label", "config", "line", "measured_s", "before_s", "fitted_s",
// "held_out_s", "before_error", "fitted_error", "held_out_error"}],
// "before", "fitted", "held_out": {"mean_abs_error", "max_abs_error"}}
std::string hardware_fit_json(const MeasuredRuns& runs, const HardwareFitResult& fit,
                              const std::string& preset_written);

// "+1.2%": a relative error as every report prints it.
std::string signed_percent(double fraction);

// A field a microbenchmark fit set: its name, the preset's value and the fit's.
struct FittedField {
  const char* name;
  double preset;
  double value;
};

// The end of a microbenchmark fit's report (`ppsim calibrate --gemms`,
// `--memory`): the timings' mean and max |error| with the preset and fitted,
// then each fitted field as lines for a preset file, with a comment naming
// the command (`flag` and the CSV), the preset, the date and the rows.
std::string format_timings_fit_end(std::string_view flag, const std::string& csv, size_t rows,
                                   const ErrorSummary& before, const ErrorSummary& after,
                                   std::string_view preset, std::string_view date,
                                   const std::vector<FittedField>& fields);

}  // namespace ppsim
