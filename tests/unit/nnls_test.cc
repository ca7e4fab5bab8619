// The Lawson-Hanson solver: hand-solvable systems, one with an active
// constraint, and random ones checked against the optimum found by trying
// every set of free variables.
#include "sim/fit/nnls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace ppsim {
namespace nnls_test {
namespace {

using ::testing::HasSubstr;

// Interior optimum: the least-squares solution of A x = b is (1, 2), both
// positive, so NNLS is plain least squares (normal equations
// [[2, 1], [1, 2]] x = [4, 5]).
TEST(Nnls, InteriorSolutionIsLeastSquares) {
  const Result<Vector> x = nnls(Matrix(3, 2, {1, 0, 0, 1, 1, 1}), {1, 2, 3});
  ASSERT_TRUE(x.ok());
  EXPECT_NEAR((*x)[0], 1.0, 1e-12);
  EXPECT_NEAR((*x)[1], 2.0, 1e-12);
}

// b = 4 - t at t = 1, 2, 3: the best line has slope -1. With the slope held
// at >= 0 the optimum is slope 0 and the mean, 2, as intercept; there the
// slope's gradient A_2^T (b - A x) = 1 + 0 - 3 = -2 < 0 (KKT).
TEST(Nnls, ActiveConstraintHoldsTheSlopeAtZero) {
  const Result<Vector> x = nnls(Matrix(3, 2, {1, 1, 1, 2, 1, 3}), {3, 2, 1});
  ASSERT_TRUE(x.ok());
  EXPECT_NEAR((*x)[0], 2.0, 1e-12);
  EXPECT_EQ((*x)[1], 0.0);
}

TEST(Nnls, EveryVariableHeldWhenNoneHelps) {
  const Result<Vector> x = nnls(Matrix(2, 2, {1, 0, 0, 1}), {-1, -2});
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(*x, Vector({0, 0}));
}

// Columns in seconds and in bytes, ten orders of magnitude apart: the
// exact solution (3e-4 s latency, 1e-9 s per byte) comes back.
TEST(Nnls, ColumnsOfVeryDifferentSizes) {
  Matrix a(4, 2);
  Vector b(4);
  const double bytes[] = {1e3, 1e5, 1e7, 1e9};
  for (int i = 0; i < 4; ++i) {
    a(i, 0) = 1;
    a(i, 1) = bytes[i];
    b[i] = 3e-4 + 1e-9 * bytes[i];
  }
  const Result<Vector> x = nnls(a, b);
  ASSERT_TRUE(x.ok());
  EXPECT_NEAR((*x)[0], 3e-4, 1e-15);
  EXPECT_NEAR((*x)[1], 1e-9, 1e-20);
}

TEST(Nnls, ZeroColumnGetsZero) {
  const Result<Vector> x = nnls(Matrix(2, 2, {1, 0, 1, 0}), {2, 4});
  ASSERT_TRUE(x.ok());
  EXPECT_NEAR((*x)[0], 3.0, 1e-12);
  EXPECT_EQ((*x)[1], 0.0);
}

TEST(Nnls, NonFiniteInputIsAnError) {
  Matrix a = Matrix(2, 2, {1, 0, 0, 1});
  a(1, 0) = std::numeric_limits<double>::quiet_NaN();
  const Result<Vector> x = nnls(a, {1, 1});
  ASSERT_FALSE(x.ok());
  EXPECT_THAT(x.error().message, HasSubstr("non-finite"));
}

// The NNLS optimum is the least-squares solution on its own support, so the
// best of the least-squares solutions over every subset of columns that come
// out >= 0 is the optimum. Random 8 x 4 systems, seeded; many have several
// variables at 0, and some need a variable to leave the free set again.
TEST(Nnls, MatchesTheBestOfEverySupport) {
  std::mt19937 rng(12345);
  std::normal_distribution<double> normal;
  const auto residual_norm = [](const Matrix& a, const Vector& x, const Vector& b) {
    Vector r = times(a, x);
    for (size_t i = 0; i < r.size(); ++i) r[i] -= b[i];
    return norm(r);
  };
  int with_zeros = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Matrix a(8, 4);
    Vector b(8);
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 4; ++j) a(i, j) = normal(rng);
      b[i] = normal(rng);
    }
    double best = std::numeric_limits<double>::infinity();
    Vector best_x(4, 0.0);
    for (int mask = 0; mask < 16; ++mask) {
      Vector x(4, 0.0);
      std::vector<int> cols;
      for (int j = 0; j < 4; ++j) {
        if (mask & (1 << j)) cols.push_back(j);
      }
      if (!cols.empty()) {
        Matrix sub(8, static_cast<int>(cols.size()));
        for (size_t k = 0; k < cols.size(); ++k)
          sub.set_column(static_cast<int>(k), a.column(cols[k]));
        const Vector z = least_squares(sub, b);
        if (std::any_of(z.begin(), z.end(), [](double v) { return v < 0; })) continue;
        for (size_t k = 0; k < cols.size(); ++k) x[cols[k]] = z[k];
      }
      const double residual = residual_norm(a, x, b);
      if (residual < best) {
        best = residual;
        best_x = x;
      }
    }
    const Result<Vector> x = nnls(a, b);
    ASSERT_TRUE(x.ok()) << trial;
    double distance2 = 0;
    for (int j = 0; j < 4; ++j) {
      EXPECT_GE((*x)[j], 0) << trial;
      distance2 += ((*x)[j] - best_x[j]) * ((*x)[j] - best_x[j]);
    }
    EXPECT_NEAR(residual_norm(a, *x, b), best, 1e-10) << trial;
    EXPECT_LT(std::sqrt(distance2), 1e-8) << trial;
    if (std::count(best_x.begin(), best_x.end(), 0.0) > 0) ++with_zeros;
  }
  EXPECT_GT(with_zeros, 50);  // the constraints did bind, often
}

}  // namespace
}  // namespace nnls_test
}  // namespace ppsim
