// Fitting the hardware model's efficiency parameters to measured iteration
// times (`ppsim calibrate --measured RUNS.csv -o PRESET.yaml`).
//
// The unknowns are the HardwareSpec fields of kFitParameters, each within
// its bounds. The fit minimises sum_i r_i^2 over the rows, with r_i =
// (predicted_i - measured_i) / measured_i, every row counting by its
// relative error: Levenberg-Marquardt (Marquardt's diagonal scaling) with
// projection onto the bounds, on parameters scaled to [0, 1] over their
// bounds, with a forward-difference Jacobian over simulate(). Everything is
// deterministic: the same rows give the same fit on any number of threads.
//
// Which parameters the rows determine is decided once, at the preset values,
// before fitting (docs/calibration.md, "Measured runs"):
// - insensitive: moving the parameter by kProbeFraction of its range, up and
//   down (inward only at a bound), changes no row's prediction by more than
//   kMinRowChange;
// - collinear: among the others, the Jacobian (the probes' secants) with its
//   columns scaled to unit length has a singular value below
//   kMinSingularValue; of the parameters whose weight in that singular
//   vector is at least half the largest, the one listed last in
//   kFitParameters is set aside, and the test repeats on the rest.
// Parameters set aside keep their preset values and are not fitted.
#pragma once

#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/status.h"
#include "sim/config/config.h"
#include "sim/fit/linear_algebra.h"
#include "sim/fit/measured_runs.h"

namespace ppsim {

// One fitted HardwareSpec field and the values it may take.
struct FitParameter {
  const char* name;
  double HardwareSpec::*member;
  double lower;
  double upper;

  double range() const { return upper - lower; }
};

// The parameters the fit may adjust, in the order reports list them: the
// efficiencies first, then the shapes of their curves. The order is also a
// priority: of parameters the rows cannot tell apart, the one listed last
// is set aside. To fit another HardwareSpec field, add a line. Not
// collective_half_mb: only messages above it depend on it (NCCL's LL
// protocol below, op_time.cc), and below it it trades against the
// collective efficiency; nccl-tests measure it (the presets' source).
inline constexpr FitParameter kFitParameters[] = {
    {"max_gemm_efficiency", &HardwareSpec::max_gemm_efficiency, 0.3, 1.0},
    {"hbm_efficiency", &HardwareSpec::hbm_efficiency, 0.3, 1.0},
    {"kernel_launch_us", &HardwareSpec::kernel_launch_us, 0.0, 50.0},
    {"intra_node_collective_efficiency", &HardwareSpec::intra_node_collective_efficiency, 0.2, 1.0},
    {"inter_node_collective_efficiency", &HardwareSpec::inter_node_collective_efficiency, 0.2, 1.0},
    {"flash_forward_efficiency", &HardwareSpec::flash_forward_efficiency, 0.2, 1.0},
    {"flash_backward_efficiency", &HardwareSpec::flash_backward_efficiency, 0.2, 1.0},
    {"gemm_tile_k_overhead", &HardwareSpec::gemm_tile_k_overhead, 0.0, 512.0},
    {"flash_key_overhead", &HardwareSpec::flash_key_overhead, 0.0, 2048.0},
    {"action_overhead_us", &HardwareSpec::action_overhead_us, 0.0, 2000.0},
};
inline constexpr int kNumFitParameters = static_cast<int>(std::size(kFitParameters));

// Identifiability (see the top of this file): a parameter moved by a tenth
// of its range must change some row's prediction by more than 0.1 %.
inline constexpr double kProbeFraction = 0.1;
inline constexpr double kMinRowChange = 1e-3;
// The smallest singular value allowed of the Jacobian with unit columns. At
// 0.05, a combination of the parameters, each moved so that the predictions
// change by a vector of norm ~1, would change them by only 5 %: measurement
// noise along it is amplified about 20-fold into the parameters.
inline constexpr double kMinSingularValue = 0.05;
// Determined: rows off by up to kRowNoise each, in the worst combination,
// would move the parameter by less than kMaxNoiseSpread of its range
// (kRowNoise times the sum of |J+| over its row of the probes' secants,
// J+ = (J^T J)^-1 J^T). Iteration times measured on a shared cluster vary
// by a few percent.
inline constexpr double kRowNoise = 0.03;
inline constexpr double kMaxNoiseSpread = 0.5;

enum class ParameterStatus {
  kFitted,
  kInsensitive,   // no row's prediction depends on it enough
  kCollinear,     // its effect is (nearly) a combination of the others'
  kUndetermined,  // the rows' noise could move it over much of its range
};
const char* to_string(ParameterStatus status);

struct ParameterResult {
  const FitParameter* parameter = nullptr;
  ParameterStatus status = ParameterStatus::kFitted;
  double preset = 0;  // the rows' hardware value (clamped to the bounds for the fit)
  double value = 0;   // fitted, or the preset when not fitted
  // The largest |relative change| of a row's prediction when the parameter
  // moves by kProbeFraction of its range from the preset.
  double largest_row_change = 0;
  // kUndetermined: kRowNoise in the rows could move it this fraction of
  // its range.
  double noise_spread = 0;
  // kCollinear: the parameters it trades off with.
  std::vector<std::string> collinear_with;
  // kFitted, with more rows than fitted parameters: the standard error from
  // the residuals and the Jacobian at the fit, s (J^T J)^-1/2, in the
  // parameter's units.
  std::optional<double> standard_error;
  bool at_bound = false;  // kFitted and held at a bound
};

// One row's iteration time: measured; predicted with the preset (before),
// with the fit on all rows (fitted), and with the fit on every other row
// (held out; absent with one row).
struct RowResult {
  const MeasuredRun* run = nullptr;
  double before_s = 0;
  double fitted_s = 0;
  std::optional<double> held_out_s;

  double measured_s() const { return run->iteration_time_s; }
  double before_error() const { return relative_error(before_s, measured_s()); }
  double fitted_error() const { return relative_error(fitted_s, measured_s()); }
  std::optional<double> held_out_error() const;
};

struct HardwareFitResult {
  std::vector<ParameterResult> parameters;  // kFitParameters' order
  std::vector<RowResult> rows;
  HardwareSpec hardware;  // the first row's, with the fitted values
  // d r_i / d value_j at the fit, one column per fitted parameter (in
  // kFitParameters' order), value in the parameter's units.
  Matrix jacobian;
  int iterations = 0;  // of the fit on all rows
  bool converged = false;
  ErrorSummary before;
  ErrorSummary fitted;
  std::optional<ErrorSummary> held_out;

  const ParameterResult& parameter(std::string_view name) const;
};

struct HardwareFitOptions {
  int threads = 0;  // simulation threads (0: one per core)
  int max_iterations = 50;
  // Leave-one-out: fit on every other row for each row (warm-started from
  // the fit on all rows, with the same parameters fitted).
  bool leave_one_out = true;
  // Called as the work advances: what (a phase's name), done, total.
  std::function<void(std::string_view what, size_t done, size_t total)> progress;
};

// Checks that every row can be fitted: a model and hardware, no
// costs.profile (whose measured times replace the analytic ones), and one
// hardware: every field but gpus_per_node and nodes equal to the first
// row's. Errors name the row.
Status check_fit_rows(const MeasuredRuns& runs, const std::vector<Config>& configs);

// Fits kFitParameters to the rows. REQUIRES: configs.size() ==
// runs.runs.size(), check_fit_rows(runs, configs).ok(). Errors: a
// simulation that fails (naming the row and the parameter values).
Result<HardwareFitResult> fit_hardware(const MeasuredRuns& runs, const std::vector<Config>& configs,
                                       const HardwareFitOptions& options = {});

}  // namespace ppsim
