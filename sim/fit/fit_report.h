// What `ppsim calibrate --measured` prints and writes as JSON: the rows'
// predictions against their measurements, and the hardware fit.
#pragma once

#include <string>
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

}  // namespace ppsim
