#include "schedules/token_slicing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ppsim {
namespace token_slicing_test {
namespace {

using ::testing::HasSubstr;

struct Best {
  std::vector<int> lengths;
  double latency = std::numeric_limits<double>::infinity();
};

// Every composition of the U = tokens / g units, 2^(U-1) of them, ordered by
// the documented rule: latency, then fewer slices, then lexicographically
// larger lengths.
Best brute_force(int tokens, int granularity, int stages, const SliceCostFn& cost) {
  const int units = tokens / granularity;
  Best best;
  for (unsigned mask = 0; mask < (1u << (units - 1)); ++mask) {
    std::vector<int> lengths;
    int start = 0;
    for (int u = 1; u <= units; ++u) {
      // Bit u-1 set: a cut after unit u.
      if (u == units || (mask >> (u - 1) & 1u)) {
        lengths.push_back((u - start) * granularity);
        start = u;
      }
    }
    const double latency = slicing_latency(lengths, stages, cost);
    const bool wins = latency != best.latency ? latency < best.latency
                                              : (lengths.size() != best.lengths.size()
                                                     ? lengths.size() < best.lengths.size()
                                                     : lengths > best.lengths);
    if (wins) best = {lengths, latency};
  }
  return best;
}

// TeraPipe's Algorithm 1 without any pruning: every distinct slice cost is a
// bound, each solved from scratch (least sum, last slice first, as the library
// sums; ties to fewer slices, then the longer first slice), the best latency
// kept by the same rule as brute_force. Checks the library's pruning.
Best every_bound(int tokens, int granularity, int stages, const SliceCostFn& cost) {
  const int units = tokens / granularity;
  std::vector<std::vector<double>> t(units + 1, std::vector<double>(units + 1, 0.0));
  std::vector<double> bounds;
  for (int c = 0; c < units; ++c) {
    for (int l = 1; c + l <= units; ++l) {
      t[c][l] = cost(l * granularity, c * granularity);
      bounds.push_back(t[c][l]);
    }
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  const double inf = std::numeric_limits<double>::infinity();
  Best best;
  for (double bound : bounds) {
    std::vector<double> sum(units + 1, inf);
    std::vector<int> count(units + 1, 0), first(units + 1, 0);
    sum[units] = 0.0;
    for (int c = units - 1; c >= 0; --c) {
      for (int l = 1; c + l <= units; ++l) {
        if (t[c][l] > bound || sum[c + l] == inf) continue;
        const double s = t[c][l] + sum[c + l];
        const int n = count[c + l] + 1;
        if (s < sum[c] || (s == sum[c] && (n < count[c] || (n == count[c] && l > first[c])))) {
          sum[c] = s;
          count[c] = n;
          first[c] = l;
        }
      }
    }
    if (sum[0] == inf) continue;
    std::vector<int> lengths;
    for (int c = 0; c < units; c += first[c]) lengths.push_back(first[c] * granularity);
    const double latency = slicing_latency(lengths, stages, cost);
    if (latency < best.latency ||
        (latency == best.latency &&
         (lengths.size() < best.lengths.size() ||
          (lengths.size() == best.lengths.size() && lengths > best.lengths)))) {
      best = {lengths, latency};
    }
  }
  return best;
}

// The returned figures, recomputed from the lengths alone.
void expect_consistent(const Slicing& s, int tokens, int granularity, int stages,
                       const SliceCostFn& cost) {
  ASSERT_FALSE(s.lengths.empty());
  EXPECT_EQ(std::accumulate(s.lengths.begin(), s.lengths.end(), 0), tokens);
  double sum = 0.0;
  double max = 0.0;
  int context = 0;
  for (int l : s.lengths) {
    EXPECT_GT(l, 0);
    EXPECT_EQ(l % granularity, 0) << l;
    const double t = cost(l, context);
    sum += t;
    max = std::max(max, t);
    context += l;
  }
  EXPECT_EQ(s.latency_s, slicing_latency(s.lengths, stages, cost));
  EXPECT_EQ(s.max_slice_s, max);
  // Summed first slice first here, last first in the library: equal up to rounding.
  EXPECT_NEAR(s.sum_s, sum, 1e-12 * sum);
}

// A cost table indexed by (length, context) in units, drawn once per seed.
struct RandomTable {
  int granularity;
  std::vector<std::vector<double>> value;  // [length][context]
  double operator()(int length, int context) const {
    return value[length / granularity][context / granularity];
  }
};

RandomTable random_table(int units, int granularity, unsigned seed, bool integers) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 6);
  RandomTable table{granularity, {}};
  table.value.assign(units + 1, std::vector<double>(units + 1, 0.0));
  for (auto& row : table.value) {
    for (double& v : row) v = integers ? small(rng) : real(rng);
  }
  return table;
}

// TeraPipe's shape: fixed overhead, work linear in the slice, attention over
// the context, with random positive coefficients.
SliceCostFn random_affine(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> coef(0.01, 1.0);
  const double a = coef(rng), b = coef(rng) * 0.1, c0 = coef(rng) * 2.0;
  return [=](int l, int c) { return a * l + b * l * c + c0; };
}

TEST(OptimalSlicing, MatchesBruteForceOnRandomCosts) {
  for (int units : {1, 2, 3, 5, 8, 12}) {
    for (int granularity : {1, 3}) {
      const int tokens = units * granularity;
      for (unsigned seed = 1; seed <= 4; ++seed) {
        const SliceCostFn affine = random_affine(seed);
        const SliceCostFn real_table = random_table(units, granularity, seed, false);
        const SliceCostFn int_table = random_table(units, granularity, seed, true);
        for (int stages : {1, 2, 4, 8}) {
          const std::string where = testing::PrintToString(
              std::vector<int>{units, granularity, static_cast<int>(seed), stages});
          for (const SliceCostFn* cost : {&affine, &real_table, &int_table}) {
            const Result<Slicing> s = optimal_slicing(tokens, granularity, stages, *cost);
            ASSERT_TRUE(s.ok()) << s.error().message;
            expect_consistent(*s, tokens, granularity, stages, *cost);
            const Best expected = brute_force(tokens, granularity, stages, *cost);
            EXPECT_EQ(s->latency_s, expected.latency) << where;
            // Small integer costs sum without rounding and tie often: the tie
            // rule must hold exactly there.
            if (cost == &int_table) {
              EXPECT_EQ(s->lengths, expected.lengths) << where;
            }
          }
        }
      }
    }
  }
}

// Beyond brute force's reach: the pruned search against every bound.
TEST(OptimalSlicing, MatchesUnprunedBoundSearch) {
  for (int units : {16, 40, 64}) {
    for (unsigned seed = 1; seed <= 3; ++seed) {
      const int granularity = 1 + static_cast<int>(seed % 2);
      const int tokens = units * granularity;
      const SliceCostFn affine = random_affine(seed);
      const SliceCostFn int_table = random_table(units, granularity, seed, true);
      // Integer-valued and smooth: many bounds share a least sum.
      const SliceCostFn int_affine = [=](int l, int c) {
        return 1.0 * (3 * static_cast<int>(seed) + l + l * c / 16);
      };
      for (int stages : {2, 3, 8, 32}) {
        const std::string where = testing::PrintToString(
            std::vector<int>{units, granularity, static_cast<int>(seed), stages});
        for (const SliceCostFn* cost : {&affine, &int_table, &int_affine}) {
          const Result<Slicing> s = optimal_slicing(tokens, granularity, stages, *cost);
          ASSERT_TRUE(s.ok()) << s.error().message;
          expect_consistent(*s, tokens, granularity, stages, *cost);
          const Best expected = every_bound(tokens, granularity, stages, *cost);
          EXPECT_EQ(s->latency_s, expected.latency) << where;
          if (cost != &affine) {
            EXPECT_EQ(s->lengths, expected.lengths) << where;
          }
        }
      }
    }
  }
}

TEST(OptimalSlicing, LinearCostOneStageTakesOneSlice) {
  // t = l: every cut sums to 4 and there is no max term, so all tie; the
  // fewest slices win.
  const Result<Slicing> s = optimal_slicing(4, 1, 1, [](int l, int) { return 1.0 * l; });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->lengths, std::vector<int>({4}));
  EXPECT_EQ(s->latency_s, 4.0);
}

TEST(OptimalSlicing, LinearCostDeepPipelineTakesSmallestSlices) {
  // t = l, p = 3: the sum is always 4, so the max decides. [4]: 4 + 2*4 = 12;
  // [2,2]: 4 + 2*2 = 8; [1,1,1,1]: 4 + 2*1 = 6.
  const Result<Slicing> s = optimal_slicing(4, 1, 3, [](int l, int) { return 1.0 * l; });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->lengths, std::vector<int>({1, 1, 1, 1}));
  EXPECT_EQ(s->latency_s, 6.0);
  EXPECT_EQ(s->sum_s, 4.0);
  EXPECT_EQ(s->max_slice_s, 1.0);
}

TEST(OptimalSlicing, GranularityBoundsTheSmallestSlice) {
  // As above with 2-token units: [2,2,2,2] gives 8 + 2*2 = 12, [4,4] 8 + 2*4 = 16.
  const Result<Slicing> s = optimal_slicing(8, 2, 3, [](int l, int) { return 1.0 * l; });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->lengths, std::vector<int>({2, 2, 2, 2}));
  EXPECT_EQ(s->latency_s, 12.0);
}

TEST(OptimalSlicing, ContextCostCanMakeCuttingWorse) {
  // t = l + l*c, p = 2. [2]: t(2,0) = 2, latency 2 + 2 = 4. [1,1]: t(1,0) = 1,
  // t(1,1) = 2, latency 3 + 2 = 5.
  const Result<Slicing> s =
      optimal_slicing(2, 1, 2, [](int l, int c) { return 1.0 * l + 1.0 * l * c; });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->lengths, std::vector<int>({2}));
  EXPECT_EQ(s->latency_s, 4.0);
}

TEST(OptimalSlicing, TiesPreferLargerFirstSlice) {
  // Slices longer than 2 are prohibitive; with p = 1 every cut into 1s and 2s
  // sums to 5, the fewest slices are three, and [2,2,1] > [2,1,2] > [1,2,2].
  const Result<Slicing> s =
      optimal_slicing(5, 1, 1, [](int l, int) { return l <= 2 ? 1.0 * l : 100.0; });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->lengths, std::vector<int>({2, 2, 1}));
  EXPECT_EQ(s->latency_s, 5.0);
}

TEST(OptimalSlicing, TiesAcrossBoundsPreferLargerFirstSlice) {
  // L = 3, p = 3 (latency = sum + 2 max), costs chosen so that two cuts found
  // under different bounds tie:
  //   [3]     t(3,0) = 3                       sum 3, max 3:   9
  //   [2,1]   t(2,0) = 2.5, t(1,2) = 0.5       sum 3, max 2.5: 8
  //   [1,2]   t(1,0) = 2,   t(2,1) = 2         sum 4, max 2:   8
  //   [1,1,1] t(1,1) = 100                                     > 100
  // [1,2] is the best under bound 2, [2,1] under bound 2.5; the bound 2.5
  // must still be tried although S*(inf) + 2 * 2.5 = 8 only equals the best.
  const SliceCostFn cost = [](int l, int c) {
    if (l == 3) return 3.0;
    if (l == 2) return c == 0 ? 2.5 : 2.0;
    return c == 0 ? 2.0 : (c == 1 ? 100.0 : 0.5);
  };
  EXPECT_EQ(slicing_latency({2, 1}, 3, cost), 8.0);
  EXPECT_EQ(slicing_latency({1, 2}, 3, cost), 8.0);
  const Result<Slicing> s = optimal_slicing(3, 1, 3, cost);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->lengths, std::vector<int>({2, 1}));
  EXPECT_EQ(s->latency_s, 8.0);
}

TEST(OptimalSlicing, NeverWorseThanAnyEvenCut) {
  // Beyond brute force: the optimum must not lose to any even cut.
  const int tokens = 240;
  for (unsigned seed = 1; seed <= 3; ++seed) {
    const SliceCostFn cost = random_affine(seed);
    for (int stages : {2, 8}) {
      const Result<Slicing> best = optimal_slicing(tokens, 1, stages, cost);
      ASSERT_TRUE(best.ok()) << best.error().message;
      expect_consistent(*best, tokens, 1, stages, cost);
      for (int n = 1; n <= tokens; ++n) {
        if (tokens % n != 0) continue;
        const Result<Slicing> even = even_slicing(tokens, n, stages, cost);
        ASSERT_TRUE(even.ok()) << even.error().message;
        EXPECT_LE(best->latency_s, even->latency_s) << n << " slices";
      }
    }
  }
}

TEST(EvenSlicing, HandComputed) {
  // t = l, p = 3, four slices of 2: sum 8, max 2, latency 8 + 2*2 = 12.
  const Result<Slicing> s = even_slicing(8, 4, 3, [](int l, int) { return 1.0 * l; });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->lengths, std::vector<int>({2, 2, 2, 2}));
  EXPECT_EQ(s->sum_s, 8.0);
  EXPECT_EQ(s->max_slice_s, 2.0);
  EXPECT_EQ(s->latency_s, 12.0);
}

TEST(SlicingLatency, HandComputed) {
  // t = l + c: [1,2,3] costs 1, 3, 6; p = 2: 10 + 6 = 16.
  EXPECT_EQ(slicing_latency({1, 2, 3}, 2, [](int l, int c) { return 1.0 * (l + c); }), 16.0);
  EXPECT_EQ(slicing_latency({}, 4, [](int, int) { return 1.0; }), 0.0);
}

std::string optimal_error(int tokens, int granularity, int stages, const SliceCostFn& cost) {
  const Result<Slicing> s = optimal_slicing(tokens, granularity, stages, cost);
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : s.error().message;
}

std::string even_error(int tokens, int slices, int stages, const SliceCostFn& cost) {
  const Result<Slicing> s = even_slicing(tokens, slices, stages, cost);
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : s.error().message;
}

TEST(OptimalSlicing, Errors) {
  const SliceCostFn unit = [](int, int) { return 1.0; };
  EXPECT_THAT(optimal_error(0, 1, 2, unit), HasSubstr("at least 1 token"));
  EXPECT_THAT(optimal_error(-4, 1, 2, unit), HasSubstr("at least 1 token"));
  EXPECT_THAT(optimal_error(8, 0, 2, unit), HasSubstr("granularity"));
  EXPECT_THAT(optimal_error(8, 3, 2, unit), HasSubstr("divides"));
  EXPECT_THAT(optimal_error(8, 1, 0, unit), HasSubstr("pipeline stage"));
  // 8192 units of 1 token; 4096 units of 2 tokens is the finest that fits.
  EXPECT_THAT(optimal_error(8192, 1, 2, unit), HasSubstr("larger granularity (e.g. 2)"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THAT(optimal_error(4, 1, 2, [](int l, int c) { return l == 2 && c == 1 ? -1.0 : 1.0; }),
              HasSubstr("t(length=2, context=1) = -1"));
  EXPECT_THAT(optimal_error(4, 1, 2, [=](int, int) { return nan; }), HasSubstr("finite"));
  EXPECT_THAT(optimal_error(4, 1, 2, [=](int, int) { return inf; }), HasSubstr("finite"));
}

TEST(EvenSlicing, Errors) {
  const SliceCostFn unit = [](int, int) { return 1.0; };
  EXPECT_THAT(even_error(0, 1, 2, unit), HasSubstr("at least 1 token"));
  EXPECT_THAT(even_error(8, 0, 2, unit), HasSubstr("at least 1 slice"));
  EXPECT_THAT(even_error(8, 3, 2, unit), HasSubstr("divides"));
  EXPECT_THAT(even_error(8, 2, 0, unit), HasSubstr("pipeline stage"));
  EXPECT_THAT(even_error(8, 2, 2, [](int, int c) { return c > 0 ? -0.5 : 1.0; }),
              HasSubstr("t(length=4, context=4) = -0.5"));
}

}  // namespace
}  // namespace token_slicing_test
}  // namespace ppsim
