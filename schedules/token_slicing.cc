#include "schedules/token_slicing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

namespace ppsim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One place for the formula, so a cut's latency is the same double whether the
// search or a caller computes it.
double combine(double sum, double max, int stages) { return sum + (stages - 1) * max; }

Status check_cost(double value, int length, int context) {
  if (!std::isfinite(value) || value < 0.0) {
    return Error{fmt::format(
        "token slicing: slice cost t(length={}, context={}) = {}: costs must be finite and >= 0 "
        "seconds",
        length, context, value)};
  }
  return {};
}

// t(l, c) for every unit-aligned slice that fits, in units: row c (the
// context, which is also where the slice starts) holds lengths 1..U-c.
class CostTable {
 public:
  static Result<CostTable> build(int units, int granularity, const SliceCostFn& cost) {
    CostTable table;
    table.units_ = units;
    table.row_.resize(units + 1);
    std::size_t size = 0;
    for (int c = 0; c <= units; ++c) {
      table.row_[c] = size;
      size += units - c;
    }
    table.values_.resize(size);
    for (int c = 0; c < units; ++c) {
      for (int l = 1; l <= units - c; ++l) {
        const double value = cost(l * granularity, c * granularity);
        if (Status st = check_cost(value, l * granularity, c * granularity); !st) {
          return Error{st.message()};
        }
        table.values_[table.row_[c] + (l - 1)] = value;
      }
    }
    return table;
  }

  int units() const { return units_; }
  // Costs of the slices starting at `context`, index length - 1.
  const double* row(int context) const { return values_.data() + row_[context]; }
  const std::vector<double>& values() const { return values_; }

 private:
  int units_ = 0;
  std::vector<std::size_t> row_;
  std::vector<double> values_;
};

// A cut in units, with its figures computed exactly as slicing_latency would.
struct Cut {
  std::vector<int> units;
  double sum = 0.0;
  double max = 0.0;
  double latency = kInf;
};

// Strict order: latency, then fewer slices, then lexicographically larger.
bool better(const Cut& a, const Cut& b) {
  if (a.latency != b.latency) return a.latency < b.latency;
  if (a.units.size() != b.units.size()) return a.units.size() < b.units.size();
  return a.units > b.units;
}

// The least-sum cut using only slices that cost <= bound. A suffix programme
// (best[i] covers units i..U) so that the sum runs last slice first, as in
// slicing_latency, and so that preferring the longest first slice on ties
// yields the lexicographically largest cut. Buffers are reused across bounds.
class Programme {
 public:
  explicit Programme(const CostTable& table)
      : table_(table),
        sum_(table.units() + 1),
        count_(table.units() + 1),
        choice_(table.units() + 1) {}

  // Returns false when no cut meets the bound.
  bool solve(double bound, int stages, Cut& cut) {
    const int units = table_.units();
    sum_[units] = 0.0;
    count_[units] = 0;
    for (int i = units - 1; i >= 0; --i) {
      const double* row = table_.row(i);
      double best_sum = kInf;
      int best_count = std::numeric_limits<int>::max();
      int best_length = 0;
      // Longest first, and only strict improvements replace it: ties keep the
      // longer slice.
      for (int l = units - i; l >= 1; --l) {
        const double t = row[l - 1];
        if (t > bound || sum_[i + l] == kInf) continue;
        const double s = t + sum_[i + l];
        const int n = count_[i + l] + 1;
        if (s < best_sum || (s == best_sum && n < best_count)) {
          best_sum = s;
          best_count = n;
          best_length = l;
        }
      }
      sum_[i] = best_sum;
      count_[i] = best_count;
      choice_[i] = best_length;
    }
    if (sum_[0] == kInf) return false;
    cut.units.clear();
    cut.max = 0.0;
    for (int i = 0; i < units; i += choice_[i]) {
      cut.units.push_back(choice_[i]);
      cut.max = std::max(cut.max, table_.row(i)[choice_[i] - 1]);
    }
    cut.sum = sum_[0];
    cut.latency = combine(cut.sum, cut.max, stages);
    return true;
  }

 private:
  const CostTable& table_;
  std::vector<double> sum_;
  std::vector<int> count_;
  std::vector<int> choice_;
};

// The least bound any cut can meet: the bottleneck path, min over cuts of the
// largest slice. Bounds below it leave the programme without a cut.
double least_feasible_bound(const CostTable& table) {
  const int units = table.units();
  std::vector<double> bottleneck(units + 1, kInf);
  bottleneck[units] = 0.0;
  for (int i = units - 1; i >= 0; --i) {
    const double* row = table.row(i);
    for (int l = 1; l <= units - i; ++l) {
      bottleneck[i] = std::min(bottleneck[i], std::max(row[l - 1], bottleneck[i + l]));
    }
  }
  return bottleneck[0];
}

// The smallest granularity that is a multiple of `granularity`, divides
// `tokens` and leaves at most kMaxSlicingUnits units: what to tell the user.
int suggested_granularity(int tokens, int granularity) {
  const int units = tokens / granularity;
  for (int k = kMaxSlicingUnits; k >= 1; --k) {
    if (units % k == 0) return tokens / k;
  }
  return tokens;
}

Slicing to_slicing(const Cut& cut, int granularity) {
  Slicing out;
  out.lengths.reserve(cut.units.size());
  for (int u : cut.units) out.lengths.push_back(u * granularity);
  out.latency_s = cut.latency;
  out.max_slice_s = cut.max;
  out.sum_s = cut.sum;
  return out;
}

}  // namespace

double slicing_latency(const std::vector<int>& lengths, int stages, const SliceCostFn& cost) {
  std::vector<double> times(lengths.size());
  int context = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    times[i] = cost(lengths[i], context);
    context += lengths[i];
  }
  double sum = 0.0;
  double max = 0.0;
  for (std::size_t i = lengths.size(); i-- > 0;) {
    sum = times[i] + sum;
    max = std::max(max, times[i]);
  }
  return combine(sum, max, stages);
}

Result<Slicing> optimal_slicing(int tokens, int granularity, int stages, const SliceCostFn& cost) {
  if (tokens <= 0) {
    return Error{fmt::format("token slicing: needs at least 1 token, got {}", tokens)};
  }
  if (granularity <= 0) {
    return Error{
        fmt::format("token slicing: granularity must be at least 1 token, got {}", granularity)};
  }
  if (tokens % granularity != 0) {
    return Error{fmt::format(
        "token slicing: {} tokens do not split into slices of whole {}-token units: choose a "
        "granularity that divides the sequence length",
        tokens, granularity)};
  }
  if (stages < 1) {
    return Error{fmt::format("token slicing: needs at least 1 pipeline stage, got {}", stages)};
  }
  const int units = tokens / granularity;
  if (units > kMaxSlicingUnits) {
    return Error{fmt::format(
        "token slicing: {} tokens at granularity {} make {} units, more than the {} the exact "
        "search handles: use a larger granularity (e.g. {})",
        tokens, granularity, units, kMaxSlicingUnits, suggested_granularity(tokens, granularity))};
  }

  Result<CostTable> table = CostTable::build(units, granularity, cost);
  if (!table.ok()) return table.error();
  Programme programme(*table);

  // The unconstrained optimum: its sum is the floor under every S*(t_max),
  // and it is a cut to beat from the start.
  Cut best;
  PPSIM_CHECK(programme.solve(kInf, stages, best));
  // With one stage the max term vanishes, so least sum is least latency and
  // the programme's tie rule is already the one we promise.
  if (stages == 1) return to_slicing(best, granularity);
  const double floor_sum = best.sum;

  // A bound above the unconstrained optimum's largest slice cannot lower the
  // sum below floor_sum yet raises the max term; one below the bottleneck
  // admits no cut. Bounds that cannot beat the best are dropped early to keep
  // the sort small.
  const double lowest = least_feasible_bound(*table);
  std::vector<double> bounds;
  for (double t : table->values()) {
    if (t >= lowest && t <= best.max && combine(floor_sum, t, stages) <= best.latency) {
      bounds.push_back(t);
    }
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());

  // S*(t) is a non-increasing step function of the bound, so the bounds are
  // searched by bisection: an interval whose ends have the same S* holds no
  // better cut than its left end (a larger bound only raises the max term),
  // and one where S*(right end) + (p - 1) * (its least bound) already exceeds
  // the best latency holds none at all. Only near the steps of S* that could
  // still win does the programme run.
  Cut cut;
  auto least_sum = [&](std::size_t k) {
    PPSIM_CHECK(programme.solve(bounds[k], stages, cut));
    const double sum = cut.sum;
    if (better(cut, best)) std::swap(best, cut);
    return sum;
  };
  // The last bound is the unconstrained optimum's largest slice: its cut is
  // `best` already.
  PPSIM_CHECK(!bounds.empty() && bounds.back() == best.max);
  struct Interval {
    std::size_t lo, hi;     // indices into bounds, both solved
    double lo_sum, hi_sum;  // S* there
  };
  std::vector<Interval> pending;
  pending.push_back({0, bounds.size() - 1, least_sum(0), floor_sum});
  while (!pending.empty()) {
    const Interval in = pending.back();
    pending.pop_back();
    if (in.hi - in.lo <= 1 || in.lo_sum == in.hi_sum) continue;
    if (combine(in.hi_sum, bounds[in.lo + 1], stages) > best.latency) continue;
    const std::size_t mid = in.lo + (in.hi - in.lo) / 2;
    const double mid_sum = least_sum(mid);
    // The left half last in, first out: smaller bounds tend to find the
    // better cuts that prune the rest.
    pending.push_back({mid, in.hi, mid_sum, in.hi_sum});
    pending.push_back({in.lo, mid, in.lo_sum, mid_sum});
  }
  return to_slicing(best, granularity);
}

Result<Slicing> even_slicing(int tokens, int slices, int stages, const SliceCostFn& cost) {
  if (tokens <= 0) {
    return Error{fmt::format("token slicing: needs at least 1 token, got {}", tokens)};
  }
  if (slices <= 0) {
    return Error{fmt::format("token slicing: needs at least 1 slice, got {}", slices)};
  }
  if (tokens % slices != 0) {
    return Error{fmt::format(
        "token slicing: {} tokens do not cut evenly into {} slices: choose a slice count that "
        "divides the sequence length",
        tokens, slices)};
  }
  if (stages < 1) {
    return Error{fmt::format("token slicing: needs at least 1 pipeline stage, got {}", stages)};
  }
  const int length = tokens / slices;
  Slicing out;
  out.lengths.assign(slices, length);
  std::vector<double> times(slices);
  for (int i = 0; i < slices; ++i) {
    times[i] = cost(length, i * length);
    if (Status st = check_cost(times[i], length, i * length); !st) return Error{st.message()};
  }
  for (int i = slices; i-- > 0;) {
    out.sum_s = times[i] + out.sum_s;
    out.max_slice_s = std::max(out.max_slice_s, times[i]);
  }
  out.latency_s = combine(out.sum_s, out.max_slice_s, stages);
  return out;
}

}  // namespace ppsim
