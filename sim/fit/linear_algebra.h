// The dense linear algebra the fits of sim/fit need, at their sizes: a
// dozen unknowns at most (calibrate's per-kind scale and offset over every
// measured action, the hardware fit's parameters over the measured runs).
// Plain loops, no blocking or vectorisation: the work grows with the rows
// times the unknowns squared, microseconds to milliseconds against the
// simulations that feed the fits,
// and this compiles in a fraction of the time a general library's
// templates take (issue 14: CI time; Eigen's decompositions cost 4-5 s of
// compilation each).
// Internal to sim/fit and its tests.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace ppsim {

using Vector = std::vector<double>;

// A dense matrix of doubles, row-major, zero-initialised.
class Matrix {
 public:
  Matrix() = default;
  Matrix(int rows, int cols);
  // The entries row after row. REQUIRES: rows * cols of them.
  Matrix(int rows, int cols, std::initializer_list<double> row_major);

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  double& operator()(int r, int c) { return values_[index(r, c)]; }
  double operator()(int r, int c) const { return values_[index(r, c)]; }
  Vector column(int c) const;
  void set_column(int c, const Vector& values);  // REQUIRES: values.size() == rows()

 private:
  std::size_t index(int r, int c) const { return static_cast<std::size_t>(r) * cols_ + c; }

  int rows_ = 0;
  int cols_ = 0;
  std::vector<double> values_;
};

double dot(const Vector& a, const Vector& b);  // REQUIRES: a.size() == b.size()
double norm(const Vector& a);
Vector times(const Matrix& a, const Vector& x);            // A x
Vector transpose_times(const Matrix& a, const Vector& y);  // A^T y
Matrix gram(const Matrix& a);                              // A^T A

// The x that minimises |A x - b|, by Householder QR with column pivoting
// (Golub and Van Loan, "Matrix Computations", 4th ed., 5.4.2): the column of
// largest remaining norm goes first, and a column whose remaining norm is at
// most max(rows, cols) * epsilon of the first's counts as a combination of
// those before it and gets 0 (a basic solution, what LAPACK's xGEQP3-based
// solvers give). Any shape; a zero matrix gives x = 0.
// REQUIRES: b.size() == a.rows().
Vector least_squares(const Matrix& a, const Vector& b);

// S = V diag(values) V^T for a symmetric S, by cyclic Jacobi rotations
// (Golub and Van Loan, 8.5.2): `values` ascending, V's columns the
// orthonormal eigenvectors in the same order. Accurate to about epsilon
// times the largest |eigenvalue|. REQUIRES: S square and symmetric.
struct SymmetricEigen {
  Vector values;
  Matrix vectors;
};
SymmetricEigen symmetric_eigen(const Matrix& s);

// The Moore-Penrose pseudo-inverse of a symmetric positive semi-definite S
// (a Gram matrix A^T A): sum over its eigenvalues l > kGramRankTolerance *
// l_max of v v^T / l; the others count as 0. A Gram matrix's eigenvalues
// carry rounding of some epsilon times the largest (each entry is a sum of
// products), so the cut sits well above that: a direction it drops has a
// singular value of A below 1e-6 of the largest.
inline constexpr double kGramRankTolerance = 1e-12;
Matrix symmetric_pseudo_inverse(const Matrix& s);

// The Moore-Penrose pseudo-inverse of any A: (A^T A)^+ A^T, cols x rows.
Matrix pseudo_inverse(const Matrix& a);

}  // namespace ppsim
