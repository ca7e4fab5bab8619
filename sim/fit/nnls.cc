#include "sim/fit/nnls.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace ppsim {
namespace {

// The least-squares solution over the columns in `passive`, 0 elsewhere.
Eigen::VectorXd solve_passive(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                              const std::vector<bool>& passive) {
  std::vector<Eigen::Index> columns;
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    if (passive[j]) columns.push_back(j);
  }
  Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(columns.size()));
  for (size_t k = 0; k < columns.size(); ++k)
    sub.col(static_cast<Eigen::Index>(k)) = a.col(columns[k]);
  const Eigen::VectorXd z_sub = sub.colPivHouseholderQr().solve(b);
  Eigen::VectorXd z = Eigen::VectorXd::Zero(a.cols());
  for (size_t k = 0; k < columns.size(); ++k) z[columns[k]] = z_sub[static_cast<Eigen::Index>(k)];
  return z;
}

}  // namespace

Result<Eigen::VectorXd> nnls(const Eigen::MatrixXd& a_in, const Eigen::VectorXd& b) {
  PPSIM_CHECK(a_in.rows() == b.size());
  if (!a_in.allFinite() || !b.allFinite()) {
    return Error{"non-negative least squares: the system has a non-finite entry"};
  }
  const Eigen::Index n = a_in.cols();
  // Unit columns: a positive scaling of a column keeps x >= 0 and the
  // optimum, and makes one tolerance fit every column.
  Eigen::VectorXd norms = a_in.colwise().norm().transpose();
  Eigen::MatrixXd a = a_in;
  for (Eigen::Index j = 0; j < n; ++j) {
    if (norms[j] > 0) a.col(j) /= norms[j];
  }
  const double tolerance = 10 * std::numeric_limits<double>::epsilon() *
                           static_cast<double>(std::max(a.rows(), n)) * std::max(1.0, b.norm());

  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  const auto unscaled = [&] {
    for (Eigen::Index j = 0; j < n; ++j) {
      if (norms[j] > 0) x[j] /= norms[j];
    }
    return x;
  };
  std::vector<bool> passive(n, false);  // the variables free to move; the others are held at 0
  for (Eigen::Index step = 0; step < 3 * n + 10; ++step) {
    const Eigen::VectorXd w = a.transpose() * (b - a * x);
    // The held variable whose release lowers the residual fastest.
    Eigen::Index enter = -1;
    double best = tolerance;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (!passive[j] && norms[j] > 0 && w[j] > best) {
        best = w[j];
        enter = j;
      }
    }
    if (enter < 0) return unscaled();
    passive[enter] = true;
    for (bool first = true;; first = false) {
      const Eigen::VectorXd z = solve_passive(a, b, passive);
      // Rounding can make the variable just released come out <= 0 although
      // its gradient was positive: then nothing can improve, and x stands.
      if (first && z[enter] <= 0) return unscaled();
      // Go from x towards z as far as feasibility allows, and hold the
      // variable that reached 0 first (and any other at 0) there.
      Eigen::Index leave = -1;
      double alpha = 1;
      for (Eigen::Index j = 0; j < n; ++j) {
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
      x += alpha * (z - x);
      x[leave] = 0;
      for (Eigen::Index j = 0; j < n; ++j) {
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
