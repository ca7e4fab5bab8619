#include "sim/fit/nnls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ppsim {
namespace {

// The least-squares solution over the columns in `passive`, 0 elsewhere.
Vector solve_passive(const Matrix& a, const Vector& b, const std::vector<bool>& passive) {
  std::vector<int> columns;
  for (int j = 0; j < a.cols(); ++j) {
    if (passive[j]) columns.push_back(j);
  }
  Matrix sub(a.rows(), static_cast<int>(columns.size()));
  for (size_t k = 0; k < columns.size(); ++k)
    sub.set_column(static_cast<int>(k), a.column(columns[k]));
  const Vector z_sub = least_squares(sub, b);
  Vector z(a.cols(), 0.0);
  for (size_t k = 0; k < columns.size(); ++k) z[columns[k]] = z_sub[k];
  return z;
}

bool all_finite(const Matrix& a, const Vector& b) {
  for (int i = 0; i < a.rows(); ++i) {
    for (int j = 0; j < a.cols(); ++j) {
      if (!std::isfinite(a(i, j))) return false;
    }
  }
  return std::all_of(b.begin(), b.end(), [](double v) { return std::isfinite(v); });
}

// b - A x.
Vector residual(const Matrix& a, const Vector& x, const Vector& b) {
  Vector r = times(a, x);
  for (size_t i = 0; i < r.size(); ++i) r[i] = b[i] - r[i];
  return r;
}

}  // namespace

Result<Vector> nnls(const Matrix& a_in, const Vector& b) {
  PPSIM_CHECK(a_in.rows() == static_cast<int>(b.size()));
  if (!all_finite(a_in, b)) {
    return Error{"non-negative least squares: the system has a non-finite entry"};
  }
  const int n = a_in.cols();
  // Unit columns: a positive scaling of a column keeps x >= 0 and the
  // optimum, and makes one tolerance fit every column.
  Vector norms(n);
  Matrix a = a_in;
  for (int j = 0; j < n; ++j) {
    Vector column = a.column(j);
    norms[j] = norm(column);
    if (norms[j] == 0) continue;
    for (double& v : column) v /= norms[j];
    a.set_column(j, column);
  }
  const double tolerance = 10 * std::numeric_limits<double>::epsilon() *
                           static_cast<double>(std::max(a.rows(), n)) * std::max(1.0, norm(b));

  Vector x(n, 0.0);
  const auto unscaled = [&] {
    for (int j = 0; j < n; ++j) {
      if (norms[j] > 0) x[j] /= norms[j];
    }
    return x;
  };
  std::vector<bool> passive(n, false);  // the variables free to move; the others are held at 0
  for (int step = 0; step < 3 * n + 10; ++step) {
    const Vector w = transpose_times(a, residual(a, x, b));
    // The held variable whose release lowers the residual fastest.
    int enter = -1;
    double best = tolerance;
    for (int j = 0; j < n; ++j) {
      if (!passive[j] && norms[j] > 0 && w[j] > best) {
        best = w[j];
        enter = j;
      }
    }
    if (enter < 0) return unscaled();
    passive[enter] = true;
    for (bool first = true;; first = false) {
      const Vector z = solve_passive(a, b, passive);
      // Rounding can make the variable just released come out <= 0 although
      // its gradient was positive: then nothing can improve, and x stands.
      if (first && z[enter] <= 0) return unscaled();
      // Go from x towards z as far as feasibility allows, and hold the
      // variable that reached 0 first (and any other at 0) there.
      int leave = -1;
      double alpha = 1;
      for (int j = 0; j < n; ++j) {
        if (!passive[j] || z[j] > 0) continue;
        const double to_zero = x[j] > 0 ? x[j] / (x[j] - z[j]) : 0.0;
        if (leave < 0 || to_zero < alpha) {
          alpha = to_zero;
          leave = j;
        }
      }
      if (leave < 0) {  // z is feasible
        x = z;
        break;
      }
      for (int j = 0; j < n; ++j) x[j] += alpha * (z[j] - x[j]);
      x[leave] = 0;
      for (int j = 0; j < n; ++j) {
        if (passive[j] && x[j] <= 0) {
          x[j] = 0;
          passive[j] = false;
        }
      }
    }
  }
  return Error{fmt::format(
      "non-negative least squares: no convergence in {} steps ({} unknowns, {} equations)",
      3 * n + 10, n, a.rows())};
}

}  // namespace ppsim
