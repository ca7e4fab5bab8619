// Token slicing: how to cut one sequence into slices for token-level pipelining.
//
// TeraPipe (Li et al., ICML 2021, §3.3) pipelines the tokens of one sequence:
// slices l_1 + ... + l_k = L pass through p stages one after another. Slice i
// attends causally to the c_i = l_1 + ... + l_{i-1} tokens before it, so its
// stage time t(l_i, c_i) grows with its position, and the pipeline takes
//
//   latency = sum_i t(l_i, c_i) + (p - 1) * max_i t(l_i, c_i).
//
// Small slices shorten the fill/drain term but pay per-slice overhead and run
// the GPU less efficiently; `optimal_slicing` finds the best cut exactly.
//
// Algorithm (TeraPipe's Algorithm 1): for each bound t_max among the distinct
// values t(l, c), a dynamic programme finds S*(t_max), the least sum of slice
// times using only slices with t <= t_max; the answer is the best of
// S*(t_max) + (p - 1) * t_max. TeraPipe tries the bounds in ascending order and
// stops once (p - 1) * t_max alone exceeds the best; we prune harder, which
// the paper's O(U^4) makes necessary beyond a few hundred units:
//  - bounds below the bottleneck (the least max any cut can have) admit no
//    cut, and bounds above the unconstrained optimum's largest slice only
//    raise the max term: neither is tried;
//  - S* is a non-increasing step function of the bound, so the bounds are
//    bisected: an interval whose ends share S* can hold nothing better than
//    its left end, and one where S*(right end) + (p - 1) * (least bound in
//    it) exceeds the best latency so far can hold nothing better at all.
// Lengths are counted in units of the granularity g. With U = L / g units a
// programme costs O(U^2) and the search O(U^2 * programmes), where the
// programmes number about the steps of S* that could still win times log U
// (tens to a few hundred in practice; every bound, O(U^2) of them, at worst),
// plus O(U^2 log U) to sort the bounds. Memory is O(U^2): every t(l, c) is
// evaluated once and kept, with the sorted bounds, about 140 MB at the cap of
// kMaxSlicingUnits units, where a search takes a second or two.
//
// Arithmetic: the sum is accumulated from the last slice back to the first,
// in `slicing_latency` and in the programme alike, so a cut's latency is the
// same double wherever it is computed, and the returned latency is the least
// one over all cuts to the bit (floating-point addition is monotone, so the
// programme stays exact under rounding).
//
// Ties: among cuts of least latency, the one with fewest slices wins, then the
// lexicographically larger length vector (larger first slice, then larger
// second, ...): fewer, longer slices keep the GPU busier at equal predicted time.
// The rule is exact whenever the sums are exact (integer or dyadic costs of
// moderate size); where rounding makes two different sums compare equal, the
// winner is still of least latency, but the tie may fall either way.
#pragma once

#include <functional>
#include <vector>

#include "schedules/status.h"

namespace ppsim {

// What a slice costs on one stage: t(length, context) in seconds, both in
// tokens. Must be a pure function: the search evaluates each pair once.
using SliceCostFn = std::function<double(int length, int context)>;

struct Slicing {
  std::vector<int> lengths;  // in tokens, first slice first; sums to L
  double latency_s = 0.0;    // slicing_latency(lengths, ...)
  double max_slice_s = 0.0;  // max_i t(l_i, c_i)
  double sum_s = 0.0;        // sum_i t(l_i, c_i), last slice first
};

// Keeps the O(U^2) table and the O(U^2)-per-bound programme within seconds.
inline constexpr int kMaxSlicingUnits = 4096;

// The least-latency cut of `tokens` into slices that are multiples of
// `granularity`, on `stages` pipeline stages (ties as in the file comment).
// Errors for tokens <= 0, granularity <= 0, tokens % granularity != 0,
// stages < 1, more than kMaxSlicingUnits units, or a negative or non-finite
// cost.
Result<Slicing> optimal_slicing(int tokens, int granularity, int stages, const SliceCostFn& cost);

// `tokens` cut into `slices` equal slices, the baseline the optimum is judged
// against. Errors for tokens <= 0, slices <= 0, tokens % slices != 0,
// stages < 1, or a negative or non-finite cost.
Result<Slicing> even_slicing(int tokens, int slices, int stages, const SliceCostFn& cost);

// The latency of a given cut, summed from the last slice back to the first.
// REQUIRES: every length > 0, stages >= 1. An empty cut takes 0 seconds.
double slicing_latency(const std::vector<int>& lengths, int stages, const SliceCostFn& cost);

}  // namespace ppsim
