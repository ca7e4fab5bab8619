// Non-negative least squares: the x >= 0 that minimises |A x - b|, by the
// active-set method of Lawson and Hanson ("Solving Least Squares Problems",
// 1974, chapter 23), on linear_algebra.h. `ppsim calibrate` fits its scales, overheads,
// latency and per-byte time with it: each must be >= 0, and a plain least
// squares fit on noisy timings can make one negative (a negative overhead
// would give a short action a negative time).
// Internal to sim/ (calibrate.cc) and its tests.
#pragma once

#include "schedules/status.h"
#include "sim/fit/linear_algebra.h"

namespace ppsim {

// The solution, to rounding: x >= 0, the gradient w = A^T (b - A x) is <= 0
// where x = 0 and 0 where x > 0 (the Karush-Kuhn-Tucker conditions). The
// columns are scaled to unit length inside, so units that differ by orders
// of magnitude (seconds and bytes) do not matter; a zero column gets 0.
// Errors: a non-finite entry, and no convergence in 3 n + 10 steps (not
// expected: each step leaves a smaller residual). REQUIRES: a.rows() == b.size().
Result<Vector> nnls(const Matrix& a, const Vector& b);

}  // namespace ppsim
