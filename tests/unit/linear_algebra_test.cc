// The fits' linear algebra: least squares, the symmetric eigendecomposition
// and the pseudo-inverse, on systems solved by hand and on random ones
// checked against the conditions that define the answer (the normal
// equations, V diag V^T = S, the four Moore-Penrose conditions).
#include "sim/fit/linear_algebra.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace ppsim {
namespace linear_algebra_test {
namespace {

Matrix random_matrix(int rows, int cols, std::mt19937* rng) {
  std::normal_distribution<double> normal;
  Matrix a(rows, cols);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) a(i, j) = normal(*rng);
  }
  return a;
}

Matrix product(const Matrix& a, const Matrix& b) {
  Matrix out(a.rows(), b.cols());
  for (int i = 0; i < a.rows(); ++i) {
    for (int j = 0; j < b.cols(); ++j) {
      for (int k = 0; k < a.cols(); ++k) out(i, j) += a(i, k) * b(k, j);
    }
  }
  return out;
}

Matrix transposed(const Matrix& a) {
  Matrix out(a.cols(), a.rows());
  for (int i = 0; i < a.rows(); ++i) {
    for (int j = 0; j < a.cols(); ++j) out(j, i) = a(i, j);
  }
  return out;
}

double largest_difference(const Matrix& a, const Matrix& b) {
  double largest = 0;
  for (int i = 0; i < a.rows(); ++i) {
    for (int j = 0; j < a.cols(); ++j) largest = std::max(largest, std::abs(a(i, j) - b(i, j)));
  }
  return largest;
}

// 2 x + y = 3, x + 3 y = 5: x = 4/5, y = 7/5.
TEST(LeastSquares, SquareSystemIsSolved) {
  const Vector x = least_squares(Matrix(2, 2, {2, 1, 1, 3}), {3, 5});
  EXPECT_NEAR(x[0], 0.8, 1e-15);
  EXPECT_NEAR(x[1], 1.4, 1e-15);
}

// The line through (0, 1), (1, 2), (2, 2): normal equations
// [[3, 3], [3, 5]] x = [5, 6], so x = (7/6, 1/2).
TEST(LeastSquares, OverdeterminedLineFit) {
  const Vector x = least_squares(Matrix(3, 2, {1, 0, 1, 1, 1, 2}), {1, 2, 2});
  EXPECT_NEAR(x[0], 7.0 / 6, 1e-15);
  EXPECT_NEAR(x[1], 0.5, 1e-15);
}

// A column twice another: the longer one goes first and explains b alone;
// the other, a combination of it, gets exactly 0.
TEST(LeastSquares, DependentColumnGetsZero) {
  const Vector x = least_squares(Matrix(3, 2, {1, 2, 1, 2, 1, 2}), {1, 2, 3});
  EXPECT_EQ(x[0], 0.0);
  EXPECT_NEAR(x[1], 1.0, 1e-15);  // 2 x1 = the mean, 2
}

TEST(LeastSquares, ZeroMatrixGivesZero) {
  EXPECT_EQ(least_squares(Matrix(3, 2), {1, 2, 3}), Vector({0, 0}));
}

// Fewer equations than unknowns, full row rank: A x = b exactly.
TEST(LeastSquares, WideSystemIsSatisfied) {
  const Matrix a = Matrix(2, 3, {1, 2, 3, 4, 5, 7});
  const Vector x = least_squares(a, {1, 2});
  const Vector ax = times(a, x);
  EXPECT_NEAR(ax[0], 1, 1e-14);
  EXPECT_NEAR(ax[1], 2, 1e-14);
}

// The least-squares solution leaves a residual orthogonal to every column:
// A^T (A x - b) = 0, to rounding.
TEST(LeastSquares, RandomTallSystemsSatisfyTheNormalEquations) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const Matrix a = random_matrix(20, 5, &rng);
    const Vector b = random_matrix(20, 1, &rng).column(0);
    Vector r = times(a, least_squares(a, b));
    for (size_t i = 0; i < r.size(); ++i) r[i] -= b[i];
    for (double g : transpose_times(a, r)) EXPECT_NEAR(g, 0, 1e-12) << trial;
  }
}

// [[2, 1], [1, 2]]: eigenvalues 1 and 3, eigenvectors (1, -1) and (1, 1)
// over sqrt 2 (up to sign).
TEST(SymmetricEigen, TwoByTwo) {
  const SymmetricEigen e = symmetric_eigen(Matrix(2, 2, {2, 1, 1, 2}));
  EXPECT_NEAR(e.values[0], 1, 1e-15);
  EXPECT_NEAR(e.values[1], 3, 1e-15);
  EXPECT_NEAR(std::abs(e.vectors(0, 0)), std::sqrt(0.5), 1e-15);
  EXPECT_NEAR(e.vectors(0, 0), -e.vectors(1, 0), 1e-15);
  EXPECT_NEAR(e.vectors(0, 1), e.vectors(1, 1), 1e-15);
}

TEST(SymmetricEigen, RandomMatricesAreReconstructed) {
  std::mt19937 rng(11);
  for (int n : {1, 3, 9, 12}) {
    const Matrix b = random_matrix(n, n, &rng);
    Matrix s = product(b, transposed(b));
    for (int i = 0; i < n; ++i) s(i, i) -= 1;  // some eigenvalues negative
    const SymmetricEigen e = symmetric_eigen(s);
    Matrix scaled = e.vectors;  // V diag(values)
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < n; ++k) scaled(i, k) *= e.values[k];
    }
    EXPECT_LT(largest_difference(product(scaled, transposed(e.vectors)), s), 1e-12 * n) << n;
    Matrix identity(n, n);
    for (int i = 0; i < n; ++i) identity(i, i) = 1;
    EXPECT_LT(largest_difference(gram(e.vectors), identity), 1e-13 * n) << n;
    for (int k = 1; k < n; ++k) EXPECT_LE(e.values[k - 1], e.values[k]) << n;
  }
}

// [[1, 1], [1, 1]] = 2 u u^T with u = (1, 1) / sqrt 2: its pseudo-inverse is
// u u^T / 2, every entry 1/4.
TEST(PseudoInverse, RankOneByHand) {
  const Matrix p = symmetric_pseudo_inverse(Matrix(2, 2, {1, 1, 1, 1}));
  EXPECT_LT(largest_difference(p, Matrix(2, 2, {0.25, 0.25, 0.25, 0.25})), 1e-15);
}

// The four Moore-Penrose conditions, for a tall matrix of rank 3 (its fourth
// column the sum of two others) and for one of full rank.
TEST(PseudoInverse, MoorePenroseConditions) {
  std::mt19937 rng(5);
  for (bool deficient : {true, false}) {
    Matrix a = random_matrix(10, 4, &rng);
    if (deficient) {
      for (int i = 0; i < a.rows(); ++i) a(i, 3) = a(i, 0) + a(i, 1);
    }
    const Matrix p = pseudo_inverse(a);
    const Matrix ap = product(a, p), pa = product(p, a);
    EXPECT_LT(largest_difference(product(ap, a), a), 1e-12) << deficient;
    EXPECT_LT(largest_difference(product(pa, p), p), 1e-12) << deficient;
    EXPECT_LT(largest_difference(ap, transposed(ap)), 1e-12) << deficient;
    EXPECT_LT(largest_difference(pa, transposed(pa)), 1e-12) << deficient;
  }
}

}  // namespace
}  // namespace linear_algebra_test
}  // namespace ppsim
