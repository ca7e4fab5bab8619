#include "sim/fit/linear_algebra.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "schedules/status.h"

namespace ppsim {
namespace {

constexpr double kEpsilon = std::numeric_limits<double>::epsilon();
// Jacobi converges quadratically: a handful of sweeps for a dozen unknowns.
constexpr int kMaxJacobiSweeps = 64;

// The squared norm of column c of `r` from row `from` down.
double tail_norm2(const Matrix& r, int c, int from) {
  double sum = 0;
  for (int i = from; i < r.rows(); ++i) sum += r(i, c) * r(i, c);
  return sum;
}

void swap_columns(Matrix* m, int a, int b) {
  for (int i = 0; i < m->rows(); ++i) std::swap((*m)(i, a), (*m)(i, b));
}

// Applies the reflection I - 2 v v^T / (v^T v), v nonzero in rows k.., to
// column c of `r`.
void reflect_column(const Vector& v, double vv, int k, int c, Matrix* r) {
  double s = 0;
  for (int i = k; i < r->rows(); ++i) s += v[i] * (*r)(i, c);
  const double f = 2 * s / vv;
  for (int i = k; i < r->rows(); ++i) (*r)(i, c) -= f * v[i];
}

void reflect_vector(const Vector& v, double vv, int k, Vector* y) {
  double s = 0;
  for (size_t i = k; i < y->size(); ++i) s += v[i] * (*y)[i];
  const double f = 2 * s / vv;
  for (size_t i = k; i < y->size(); ++i) (*y)[i] -= f * v[i];
}

// The sum of squares of the entries above the diagonal.
double off_diagonal2(const Matrix& a) {
  double sum = 0;
  for (int p = 0; p < a.rows(); ++p) {
    for (int q = p + 1; q < a.cols(); ++q) sum += a(p, q) * a(p, q);
  }
  return sum;
}

// One Jacobi rotation in the (p, q) plane that zeroes a(p, q): A <- J^T A J,
// V <- V J (Golub and Van Loan, Algorithm 8.5.1, sym.schur2).
void rotate(int p, int q, Matrix* a, Matrix* v) {
  const double apq = (*a)(p, q);
  if (apq == 0) return;
  const double tau = ((*a)(q, q) - (*a)(p, p)) / (2 * apq);
  const double t = (tau >= 0 ? 1.0 : -1.0) / (std::abs(tau) + std::sqrt(1 + tau * tau));
  const double c = 1 / std::sqrt(1 + t * t), s = t * c;
  const int n = a->rows();
  for (int k = 0; k < n; ++k) {  // columns p and q: A J
    const double akp = (*a)(k, p), akq = (*a)(k, q);
    (*a)(k, p) = c * akp - s * akq;
    (*a)(k, q) = s * akp + c * akq;
  }
  for (int k = 0; k < n; ++k) {  // rows p and q: J^T (A J)
    const double apk = (*a)(p, k), aqk = (*a)(q, k);
    (*a)(p, k) = c * apk - s * aqk;
    (*a)(q, k) = s * apk + c * aqk;
  }
  (*a)(p, q) = (*a)(q, p) = 0;
  for (int k = 0; k < n; ++k) {
    const double vkp = (*v)(k, p), vkq = (*v)(k, q);
    (*v)(k, p) = c * vkp - s * vkq;
    (*v)(k, q) = s * vkp + c * vkq;
  }
}

}  // namespace

Matrix::Matrix(int rows, int cols)
    : rows_(rows), cols_(cols), values_(static_cast<size_t>(rows) * cols, 0.0) {
  PPSIM_CHECK(rows >= 0 && cols >= 0);
}

Matrix::Matrix(int rows, int cols, std::initializer_list<double> row_major)
    : rows_(rows), cols_(cols), values_(row_major) {
  PPSIM_CHECK(rows >= 0 && cols >= 0 && values_.size() == static_cast<size_t>(rows) * cols);
}

Vector Matrix::column(int c) const {
  Vector out(rows_);
  for (int i = 0; i < rows_; ++i) out[i] = (*this)(i, c);
  return out;
}

void Matrix::set_column(int c, const Vector& values) {
  PPSIM_CHECK(static_cast<int>(values.size()) == rows_);
  for (int i = 0; i < rows_; ++i) (*this)(i, c) = values[i];
}

double dot(const Vector& a, const Vector& b) {
  PPSIM_CHECK(a.size() == b.size());
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

double norm(const Vector& a) { return std::sqrt(dot(a, a)); }

Vector times(const Matrix& a, const Vector& x) {
  PPSIM_CHECK(static_cast<int>(x.size()) == a.cols());
  Vector out(a.rows(), 0.0);
  for (int i = 0; i < a.rows(); ++i) {
    for (int j = 0; j < a.cols(); ++j) out[i] += a(i, j) * x[j];
  }
  return out;
}

Vector transpose_times(const Matrix& a, const Vector& y) {
  PPSIM_CHECK(static_cast<int>(y.size()) == a.rows());
  Vector out(a.cols(), 0.0);
  for (int i = 0; i < a.rows(); ++i) {
    for (int j = 0; j < a.cols(); ++j) out[j] += a(i, j) * y[i];
  }
  return out;
}

Matrix gram(const Matrix& a) {
  Matrix out(a.cols(), a.cols());
  for (int p = 0; p < a.cols(); ++p) {
    for (int q = p; q < a.cols(); ++q) {
      double sum = 0;
      for (int i = 0; i < a.rows(); ++i) sum += a(i, p) * a(i, q);
      out(p, q) = out(q, p) = sum;
    }
  }
  return out;
}

Vector least_squares(const Matrix& a, const Vector& b) {
  PPSIM_CHECK(static_cast<int>(b.size()) == a.rows());
  const int m = a.rows(), n = a.cols();
  Matrix r = a;
  Vector qtb = b;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  const double tolerance = std::max(m, n) * kEpsilon;
  double first = 0;  // the first pivot's norm
  int rank = 0;
  for (int k = 0; k < std::min(m, n); ++k) {
    int pivot = k;
    double largest = -1;
    for (int c = k; c < n; ++c) {
      const double norm2 = tail_norm2(r, c, k);
      if (norm2 > largest) {
        largest = norm2;
        pivot = c;
      }
    }
    const double alpha_norm = std::sqrt(largest);
    if (k == 0) first = alpha_norm;
    if (alpha_norm == 0 || alpha_norm <= tolerance * first) break;
    swap_columns(&r, k, pivot);
    std::swap(order[k], order[pivot]);
    // v = x - alpha e_k with alpha of the sign opposite x_k: no cancellation.
    const double alpha = r(k, k) > 0 ? -alpha_norm : alpha_norm;
    Vector v(m, 0.0);
    for (int i = k; i < m; ++i) v[i] = r(i, k);
    v[k] -= alpha;
    const double vv = dot(v, v);
    for (int c = k + 1; c < n; ++c) reflect_column(v, vv, k, c, &r);
    reflect_vector(v, vv, k, &qtb);
    r(k, k) = alpha;
    for (int i = k + 1; i < m; ++i) r(i, k) = 0;
    rank = k + 1;
  }
  Vector z(rank, 0.0);  // R z = Q^T b over the first `rank` columns
  for (int k = rank - 1; k >= 0; --k) {
    double sum = qtb[k];
    for (int j = k + 1; j < rank; ++j) sum -= r(k, j) * z[j];
    z[k] = sum / r(k, k);
  }
  Vector x(n, 0.0);
  for (int k = 0; k < rank; ++k) x[order[k]] = z[k];
  return x;
}

SymmetricEigen symmetric_eigen(const Matrix& s) {
  PPSIM_CHECK(s.rows() == s.cols());
  const int n = s.rows();
  Matrix a = s;
  Matrix v(n, n);
  for (int i = 0; i < n; ++i) v(i, i) = 1;
  double diagonal2 = 0;
  for (int i = 0; i < n; ++i) diagonal2 += a(i, i) * a(i, i);
  const double scale2 = diagonal2 + 2 * off_diagonal2(a);
  for (int sweep = 0; sweep < kMaxJacobiSweeps; ++sweep) {
    if (off_diagonal2(a) <= kEpsilon * kEpsilon * scale2) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) rotate(p, q, &a, &v);
    }
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) { return a(x, x) < a(y, y); });
  SymmetricEigen out{Vector(n), Matrix(n, n)};
  for (int k = 0; k < n; ++k) {
    out.values[k] = a(order[k], order[k]);
    out.vectors.set_column(k, v.column(order[k]));
  }
  return out;
}

Matrix symmetric_pseudo_inverse(const Matrix& s) {
  const SymmetricEigen eigen = symmetric_eigen(s);
  const int n = s.rows();
  Matrix out(n, n);
  if (n == 0) return out;
  const double largest = std::max(std::abs(eigen.values.front()), std::abs(eigen.values.back()));
  const double tolerance = kGramRankTolerance * largest;
  for (int k = 0; k < n; ++k) {
    const double value = eigen.values[k];
    if (value <= tolerance) continue;
    for (int p = 0; p < n; ++p) {
      for (int q = 0; q < n; ++q) {
        out(p, q) += eigen.vectors(p, k) * eigen.vectors(q, k) / value;
      }
    }
  }
  return out;
}

Matrix pseudo_inverse(const Matrix& a) {
  const Matrix inverse = symmetric_pseudo_inverse(gram(a));
  Matrix out(a.cols(), a.rows());
  for (int c = 0; c < a.cols(); ++c) {
    for (int i = 0; i < a.rows(); ++i) {
      for (int d = 0; d < a.cols(); ++d) out(c, i) += inverse(c, d) * a(i, d);
    }
  }
  return out;
}

}  // namespace ppsim
