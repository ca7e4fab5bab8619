#include "sim/fit/hardware_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "sim/fit/hardware_preset.h"
#include "sim/fit/linear_algebra.h"

namespace ppsim {
namespace {

// The forward-difference step of the Jacobian, in units of a parameter's
// range: large against the picosecond rounding of the cost table (a row's
// prediction moves by ~1e-3 relative, the rounding by ~1e-9), small against
// the curvature.
constexpr double kJacobianStep = 1e-3;
// Stops when an accepted step lowers the sum of squares by less than this
// fraction of it, or moves no parameter by more than kMinStep of its range.
constexpr double kMinRelativeDecrease = 1e-10;
constexpr double kMinStep = 1e-10;
constexpr double kInitialDamping = 1e-3;
constexpr double kMaxDamping = 1e10;
// A parameter takes part in a near-null combination when its weight in the
// singular vector is at least this (the vector has unit length).
constexpr double kCollinearWeight = 0.2;

// One value per kFitParameters entry.
using Values = std::vector<double>;

Values values_of(const HardwareSpec& hardware) {
  Values values;
  for (const FitParameter& p : kFitParameters) values.push_back(hardware.*p.member);
  return values;
}

void set_values(const Values& values, HardwareSpec* hardware) {
  for (int j = 0; j < kNumFitParameters; ++j) hardware->*kFitParameters[j].member = values[j];
}

double to_unit(int j, double value) {
  return (value - kFitParameters[j].lower) / kFitParameters[j].range();
}

double from_unit(int j, double unit) {
  return kFitParameters[j].lower + std::clamp(unit, 0.0, 1.0) * kFitParameters[j].range();
}

std::string describe(const Values& values) {
  std::vector<std::string> parts;
  for (int j = 0; j < kNumFitParameters; ++j) {
    parts.push_back(fmt::format("{} {:.6g}", kFitParameters[j].name, values[j]));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The rows one fit sees (all of them, or all but one), predicted at any
// parameter values.
class Rows {
 public:
  Rows(const MeasuredRuns& runs, const std::vector<Config>& configs, std::vector<size_t> rows,
       int threads)
      : runs_(runs), configs_(configs), rows_(std::move(rows)), threads_(threads) {}

  size_t size() const { return rows_.size(); }

  // The predicted iteration times of the rows at each point: [point][row].
  Result<std::vector<Vector>> predict(const std::vector<Values>& points) const {
    std::vector<Config> configs;
    configs.reserve(points.size() * rows_.size());
    for (const Values& values : points) {
      for (size_t row : rows_) {
        configs.push_back(configs_[row]);
        set_values(values, &*configs.back().hardware);
      }
    }
    const auto name = [&](size_t k) {
      const size_t row = rows_[k % rows_.size()];
      return fmt::format("{} (with {})", runs_.where(runs_.runs[row]),
                         describe(points[k / rows_.size()]));
    };
    Result<std::vector<double>> times = predict_iteration_times(configs, threads_, name);
    if (!times.ok()) return times.error();
    std::vector<Vector> out(points.size(), Vector(rows_.size()));
    for (size_t k = 0; k < times->size(); ++k)
      out[k / rows_.size()][k % rows_.size()] = (*times)[k];
    return out;
  }

  // r_i = (predicted_i - measured_i) / measured_i.
  Vector residuals(const Vector& predicted) const {
    Vector r(rows_.size());
    for (size_t i = 0; i < rows_.size(); ++i) {
      r[i] = relative_error(predicted[i], runs_.runs[rows_[i]].iteration_time_s);
    }
    return r;
  }

 private:
  const MeasuredRuns& runs_;
  const std::vector<Config>& configs_;
  std::vector<size_t> rows_;
  int threads_;
};

struct Point {
  Values values;
  Vector residuals;
  double cost = 0;  // the sum of squared residuals
};

struct Outcome {
  Point point;
  int iterations = 0;
  bool converged = false;
};

// Levenberg-Marquardt over the `fitted` parameters (indices into
// kFitParameters) in unit coordinates, projected onto [0, 1]. A parameter
// at a bound whose gradient points outward is held there for the step.
class Minimiser {
 public:
  Minimiser(const Rows& rows, std::vector<int> fitted, int max_iterations,
            std::function<void(int)> on_iteration)
      : rows_(rows),
        fitted_(std::move(fitted)),
        max_iterations_(max_iterations),
        on_iteration_(std::move(on_iteration)) {}

  Result<Point> evaluate(const Values& values) const {
    Result<std::vector<Vector>> predicted = rows_.predict({values});
    if (!predicted.ok()) return predicted.error();
    Point point{values, rows_.residuals((*predicted)[0]), 0};
    point.cost = dot(point.residuals, point.residuals);
    return point;
  }

  // d r / d u, one column per fitted parameter (u: its unit coordinate).
  Result<Matrix> jacobian(const Point& at) const {
    std::vector<Values> points;
    std::vector<double> steps;
    for (int j : fitted_) {
      const double u = to_unit(j, at.values[j]);
      const double step = u + kJacobianStep <= 1 ? kJacobianStep : -kJacobianStep;
      Values moved = at.values;
      moved[j] = from_unit(j, u + step);
      points.push_back(std::move(moved));
      steps.push_back(step);
    }
    Result<std::vector<Vector>> predicted = rows_.predict(points);
    if (!predicted.ok()) return predicted.error();
    Matrix jac(static_cast<int>(rows_.size()), static_cast<int>(fitted_.size()));
    for (size_t k = 0; k < fitted_.size(); ++k) {
      const Vector moved = rows_.residuals((*predicted)[k]);
      for (size_t i = 0; i < moved.size(); ++i) {
        jac(static_cast<int>(i), static_cast<int>(k)) = (moved[i] - at.residuals[i]) / steps[k];
      }
    }
    return jac;
  }

  Result<Outcome> run(const Values& start) {
    Result<Point> first = evaluate(start);
    if (!first.ok()) return first.error();
    Outcome out{std::move(*first), 0, false};
    if (fitted_.empty()) {
      out.converged = true;
      return out;
    }
    double damping = kInitialDamping;
    while (!out.converged && out.iterations < max_iterations_) {
      ++out.iterations;
      if (on_iteration_) on_iteration_(out.iterations);
      Result<bool> stepped = step(&out.point, &damping);
      if (!stepped.ok()) return stepped.error();
      out.converged = !*stepped;
    }
    return out;
  }

 private:
  // The fitted parameters free to move: not at a bound with the gradient
  // pointing out of it.
  std::vector<int> free_columns(const Point& at, const Vector& gradient) const {
    std::vector<int> free;
    for (size_t k = 0; k < fitted_.size(); ++k) {
      const double u = to_unit(fitted_[k], at.values[fitted_[k]]);
      const double g = gradient[k];
      if ((u <= 0 && g > 0) || (u >= 1 && g < 0)) continue;
      free.push_back(static_cast<int>(k));
    }
    return free;
  }

  // The damped Gauss-Newton step of the free columns, projected: the delta
  // that minimises |J delta + r|^2 + sum_a d_a delta_a^2, with Marquardt's
  // d_a = damping * (J^T J)_aa (floored), as the least-squares solution of J
  // stacked on diag(sqrt(d)) against -r stacked on zeros: the normal
  // equations (J^T J + D) delta = -J^T r without squaring J's condition.
  Values trial(const Point& at, const Matrix& jac, const std::vector<int>& free,
               double damping) const {
    const int n = static_cast<int>(free.size()), rows = jac.rows();
    Vector diagonal(n);
    for (int a = 0; a < n; ++a) {
      const Vector column = jac.column(free[a]);
      diagonal[a] = dot(column, column);
    }
    const double floor =
        1e-12 * std::max(*std::max_element(diagonal.begin(), diagonal.end()), 1e-300);
    Matrix stacked(rows + n, n);
    Vector rhs(rows + n, 0.0);
    for (int i = 0; i < rows; ++i) {
      rhs[i] = -at.residuals[i];
      for (int a = 0; a < n; ++a) stacked(i, a) = jac(i, free[a]);
    }
    for (int a = 0; a < n; ++a)
      stacked(rows + a, a) = std::sqrt(damping * std::max(diagonal[a], floor));
    const Vector delta = least_squares(stacked, rhs);
    Values values = at.values;
    for (int a = 0; a < n; ++a) {
      const int j = fitted_[free[a]];
      values[j] = from_unit(j, to_unit(j, at.values[j]) + delta[a]);
    }
    return values;
  }

  static double largest_unit_move(const Values& a, const Values& b) {
    double largest = 0;
    for (int j = 0; j < kNumFitParameters; ++j) {
      largest = std::max(largest, std::abs(to_unit(j, a[j]) - to_unit(j, b[j])));
    }
    return largest;
  }

  // One iteration: a Jacobian, then steps with growing damping until one
  // lowers the sum of squares. False when converged (no useful step left).
  Result<bool> step(Point* at, double* damping) const {
    Result<Matrix> jac = jacobian(*at);
    if (!jac.ok()) return jac.error();
    const Vector gradient = transpose_times(*jac, at->residuals);
    const std::vector<int> free = free_columns(*at, gradient);
    if (free.empty() || at->cost == 0) return false;
    for (; *damping <= kMaxDamping; *damping *= 10) {
      const Values values = trial(*at, *jac, free, *damping);
      if (largest_unit_move(values, at->values) < kMinStep) return false;
      Result<Point> next = evaluate(values);
      if (!next.ok()) return next.error();
      if (next->cost < at->cost) {
        const bool small = at->cost - next->cost < kMinRelativeDecrease * at->cost;
        *at = std::move(*next);
        *damping = std::max(*damping / 10, 1e-12);
        return !small;
      }
    }
    return false;
  }

  const Rows& rows_;
  std::vector<int> fitted_;
  int max_iterations_;
  std::function<void(int)> on_iteration_;
};

// ---- Identifiability ----

struct Probe {
  Vector before;   // predictions at the preset values
  Matrix secants;  // d r / d u per parameter, from the probes
  std::vector<double> largest_row_change;
};

// Moves each parameter by kProbeFraction of its range, up and down from the
// start (inward only at a bound), and measures what the predictions do.
Result<Probe> probe(const Rows& rows, const Values& preset, const Values& start) {
  std::vector<Values> points = {preset, start};
  std::vector<std::pair<int, double>> moves;  // (parameter, unit step)
  for (int j = 0; j < kNumFitParameters; ++j) {
    const double u = to_unit(j, start[j]);
    for (double step : {kProbeFraction, -kProbeFraction}) {
      if (u + step < -1e-12 || u + step > 1 + 1e-12) continue;
      Values moved = start;
      moved[j] = from_unit(j, u + step);
      points.push_back(std::move(moved));
      moves.emplace_back(j, step);
    }
  }
  Result<std::vector<Vector>> predicted = rows.predict(points);
  if (!predicted.ok()) return predicted.error();
  const Vector& base = (*predicted)[1];
  const Vector base_residuals = rows.residuals(base);
  const int n = static_cast<int>(rows.size());
  Probe out{(*predicted)[0], Matrix(n, kNumFitParameters),
            std::vector<double>(kNumFitParameters, 0.0)};
  std::vector<double> span(kNumFitParameters, 0.0);
  for (size_t k = 0; k < moves.size(); ++k) {
    const auto [j, step] = moves[k];
    const Vector& moved = (*predicted)[k + 2];
    const Vector moved_residuals = rows.residuals(moved);
    for (int i = 0; i < n; ++i) {
      const double change = std::abs(moved[i] / base[i] - 1);
      out.largest_row_change[j] = std::max(out.largest_row_change[j], change);
      // Secant over both probes (or the one): in r units, r = predicted / measured - 1.
      out.secants(i, j) += (moved_residuals[i] - base_residuals[i]) * (step > 0 ? 1 : -1);
    }
    span[j] += std::abs(step);
  }
  for (int j = 0; j < kNumFitParameters; ++j) {
    for (int i = 0; i < n && span[j] > 0; ++i) out.secants(i, j) /= span[j];
  }
  return out;
}

// The smallest singular value of `columns` of the secants scaled to unit
// length, and its right singular vector: the square root of the smallest
// eigenvalue of their Gram matrix, and its eigenvector (with fewer rows
// than parameters, the Gram matrix is singular: a value of 0).
std::pair<double, Vector> weakest_direction(const Matrix& secants,
                                            const std::vector<int>& columns) {
  const int k = static_cast<int>(columns.size());
  Matrix m(secants.rows(), k);
  for (int c = 0; c < k; ++c) {
    Vector column = secants.column(columns[c]);
    const double length = norm(column);
    for (double& v : column) v /= length;
    m.set_column(c, column);
  }
  const SymmetricEigen eigen = symmetric_eigen(gram(m));
  return {std::sqrt(std::max(eigen.values[0], 0.0)), eigen.vectors.column(0)};
}

// Sets aside the parameters the rows cannot tell apart, one at a time.
void set_aside_collinear(const Probe& probe, std::vector<ParameterResult>* params,
                         std::vector<int>* fitted) {
  while (fitted->size() > 1) {
    const auto [sigma, v] = weakest_direction(probe.secants, *fitted);
    if (sigma >= kMinSingularValue) return;
    // The last listed of the heavy ones (`fitted` is in table order).
    double heaviest = 0;
    for (double weight : v) heaviest = std::max(heaviest, std::abs(weight));
    int drop = 0;
    for (size_t c = 0; c < fitted->size(); ++c) {
      if (std::abs(v[c]) >= 0.5 * heaviest) drop = static_cast<int>(c);
    }
    ParameterResult& dropped = (*params)[(*fitted)[drop]];
    dropped.status = ParameterStatus::kCollinear;
    for (size_t c = 0; c < fitted->size(); ++c) {
      if (static_cast<int>(c) != drop && std::abs(v[c]) >= kCollinearWeight) {
        dropped.collinear_with.emplace_back(kFitParameters[(*fitted)[c]].name);
      }
    }
    fitted->erase(fitted->begin() + drop);
  }
}

// Per column of J, the sum of |J+| over its row: how far rows off by 1
// each, in the worst combination, would move the parameter.
std::vector<double> noise_spreads(const Matrix& j) {
  const Matrix pinv = pseudo_inverse(j);
  std::vector<double> spreads(j.cols(), 0.0);
  for (int c = 0; c < j.cols(); ++c) {
    for (int i = 0; i < j.rows(); ++i) spreads[c] += std::abs(pinv(c, i));
  }
  return spreads;
}

// Sets aside, one at a time, the parameter that noise of kRowNoise in the
// rows would move the most, while that is over kMaxNoiseSpread of its range.
void set_aside_undetermined(const Probe& probe, std::vector<ParameterResult>* params,
                            std::vector<int>* fitted) {
  while (!fitted->empty()) {
    Matrix j(probe.secants.rows(), static_cast<int>(fitted->size()));
    for (size_t c = 0; c < fitted->size(); ++c) {
      j.set_column(static_cast<int>(c), probe.secants.column((*fitted)[c]));
    }
    const std::vector<double> spreads = noise_spreads(j);
    const size_t widest = std::max_element(spreads.begin(), spreads.end()) - spreads.begin();
    const double spread = kRowNoise * spreads[widest];
    if (spread <= kMaxNoiseSpread) return;
    ParameterResult& dropped = (*params)[(*fitted)[widest]];
    dropped.status = ParameterStatus::kUndetermined;
    dropped.noise_spread = spread;
    fitted->erase(fitted->begin() + widest);
  }
}

// Decides which parameters are fitted (returned, in table order) and fills
// in each one's status.
std::vector<int> identify(const Probe& probe, std::vector<ParameterResult>* params) {
  std::vector<int> fitted;
  for (int j = 0; j < kNumFitParameters; ++j) {
    (*params)[j].largest_row_change = probe.largest_row_change[j];
    if (probe.largest_row_change[j] <= kMinRowChange) {
      (*params)[j].status = ParameterStatus::kInsensitive;
    } else {
      fitted.push_back(j);
    }
  }
  set_aside_collinear(probe, params, &fitted);
  set_aside_undetermined(probe, params, &fitted);
  return fitted;
}

// ---- The result ----

// s (J^T J)^-1/2 per fitted parameter, in its units, from the Jacobian in
// parameter units; with no more rows than parameters there is no s.
void add_standard_errors(const Matrix& jac, double cost, const std::vector<int>& fitted,
                         std::vector<ParameterResult>* params) {
  const int n = jac.rows(), k = jac.cols();
  if (k == 0 || n <= k) return;
  const double variance = cost / static_cast<double>(n - k);
  const Matrix inverse = symmetric_pseudo_inverse(gram(jac));
  for (int c = 0; c < k; ++c) {
    (*params)[fitted[c]].standard_error = std::sqrt(std::max(0.0, variance * inverse(c, c)));
  }
}

std::vector<ParameterResult> initial_parameters(const Values& preset) {
  std::vector<ParameterResult> params(kNumFitParameters);
  for (int j = 0; j < kNumFitParameters; ++j) {
    params[j].parameter = &kFitParameters[j];
    params[j].preset = preset[j];
    params[j].value = preset[j];
  }
  return params;
}

Values clamped(Values values) {
  for (int j = 0; j < kNumFitParameters; ++j) values[j] = from_unit(j, to_unit(j, values[j]));
  return values;
}

std::vector<size_t> all_but(size_t n, size_t left_out) {
  std::vector<size_t> rows;
  for (size_t i = 0; i < n; ++i) {
    if (i != left_out) rows.push_back(i);
  }
  return rows;
}

// Each row predicted with the fit on the others.
Result<std::vector<double>> leave_one_out(const MeasuredRuns& runs,
                                          const std::vector<Config>& configs,
                                          const std::vector<int>& fitted, const Values& start,
                                          const HardwareFitOptions& options) {
  const size_t n = configs.size();
  std::vector<double> held_out(n);
  for (size_t i = 0; i < n; ++i) {
    const Rows others(runs, configs, all_but(n, i), options.threads);
    Minimiser minimiser(others, fitted, options.max_iterations, nullptr);
    Result<Outcome> fit = minimiser.run(start);
    if (!fit.ok()) return fit.error();
    const Rows one(runs, configs, {i}, options.threads);
    Result<std::vector<Vector>> predicted = one.predict({fit->point.values});
    if (!predicted.ok()) return predicted.error();
    held_out[i] = (*predicted)[0][0];
    if (options.progress) options.progress("leave-one-out", i + 1, n);
  }
  return held_out;
}

std::vector<RowResult> row_results(const MeasuredRuns& runs, const Probe& probe, const Point& fit) {
  std::vector<RowResult> rows;
  for (size_t i = 0; i < runs.runs.size(); ++i) {
    const double measured = runs.runs[i].iteration_time_s;
    rows.push_back({&runs.runs[i], probe.before[i], measured * (1 + fit.residuals[i]), {}});
  }
  return rows;
}

void summarize(HardwareFitResult* result) {
  std::vector<double> before, fitted, held_out;
  for (const RowResult& row : result->rows) {
    before.push_back(row.before_error());
    fitted.push_back(row.fitted_error());
    if (row.held_out_s) held_out.push_back(*row.held_out_error());
  }
  result->before = summarize_errors(before);
  result->fitted = summarize_errors(fitted);
  if (!held_out.empty()) result->held_out = summarize_errors(held_out);
}

}  // namespace

const char* to_string(ParameterStatus status) {
  switch (status) {
    case ParameterStatus::kFitted:
      return "fitted";
    case ParameterStatus::kInsensitive:
      return "insensitive";
    case ParameterStatus::kCollinear:
      return "collinear";
    case ParameterStatus::kUndetermined:
      return "undetermined";
  }
  return "?";
}

std::optional<double> RowResult::held_out_error() const {
  if (!held_out_s) return std::nullopt;
  return relative_error(*held_out_s, measured_s());
}

const ParameterResult& HardwareFitResult::parameter(std::string_view name) const {
  for (const ParameterResult& p : parameters) {
    if (p.parameter->name == name) return p;
  }
  PPSIM_CHECK(false && "no such fit parameter");
  return parameters.front();
}

Status check_fit_rows(const MeasuredRuns& runs, const std::vector<Config>& configs) {
  PPSIM_CHECK(configs.size() == runs.runs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string where = runs.where(runs.runs[i]);
    const Config& c = configs[i];
    if (!c.model || !c.hardware) {
      return Error{
          fmt::format("{}: {} has no {}: the fit adjusts the analytic model's hardware figures",
                      where, runs.runs[i].config, c.model ? "hardware section" : "model section")};
    }
    if (!c.profile_path.empty()) {
      return Error{fmt::format(
          "{}: {} has costs.profile, whose measured times replace the analytic ones the fit "
          "adjusts; leave it out of the measured runs",
          where, runs.runs[i].config)};
    }
    if (std::optional<std::string> field = hardware_difference(*configs[0].hardware, *c.hardware)) {
      return Error{fmt::format(
          "{}: its hardware differs from the first row's ({}) in {}: calibrate one cluster at a "
          "time (every row the same preset and overrides, but gpus_per_node and nodes)",
          where, runs.where(runs.runs[0]), *field)};
    }
  }
  return {};
}

Result<HardwareFitResult> fit_hardware(const MeasuredRuns& runs, const std::vector<Config>& configs,
                                       const HardwareFitOptions& options) {
  PPSIM_CHECK(configs.size() == runs.runs.size() && !configs.empty());
  const Values preset = values_of(*configs[0].hardware);
  const Rows all(runs, configs, all_but(configs.size(), configs.size()), options.threads);

  Result<Probe> probed = probe(all, preset, clamped(preset));
  if (!probed.ok()) return probed.error();
  if (options.progress) options.progress("probe", 1, 1);
  HardwareFitResult result;
  result.parameters = initial_parameters(preset);
  const std::vector<int> fitted = identify(*probed, &result.parameters);
  // Parameters not fitted keep their preset values, even out of bounds.
  Values start = preset;
  for (int j : fitted) start[j] = from_unit(j, to_unit(j, preset[j]));

  Minimiser minimiser(all, fitted, options.max_iterations, [&](int iteration) {
    if (options.progress) options.progress("fit", iteration, options.max_iterations);
  });
  Result<Outcome> fit = minimiser.run(start);
  if (!fit.ok()) return fit.error();
  result.iterations = fit->iterations;
  result.converged = fit->converged;
  Result<Matrix> jac = minimiser.jacobian(fit->point);
  if (!jac.ok()) return jac.error();
  result.jacobian = *jac;
  for (size_t c = 0; c < fitted.size(); ++c) {
    const int j = fitted[c];
    for (int i = 0; i < result.jacobian.rows(); ++i) {
      result.jacobian(i, static_cast<int>(c)) /= kFitParameters[j].range();
    }
    ParameterResult& p = result.parameters[j];
    p.value = fit->point.values[j];
    const double u = to_unit(j, p.value);
    p.at_bound = u <= 1e-9 || u >= 1 - 1e-9;
  }
  add_standard_errors(result.jacobian, fit->point.cost, fitted, &result.parameters);
  result.hardware = *configs[0].hardware;
  set_values(fit->point.values, &result.hardware);
  result.rows = row_results(runs, *probed, fit->point);

  if (options.leave_one_out && configs.size() > 1) {
    Result<std::vector<double>> held_out =
        leave_one_out(runs, configs, fitted, fit->point.values, options);
    if (!held_out.ok()) return held_out.error();
    for (size_t i = 0; i < configs.size(); ++i) result.rows[i].held_out_s = (*held_out)[i];
  }
  summarize(&result);
  return result;
}

}  // namespace ppsim
