#include "sim/cost/partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "sim/cost/cost_model.h"

namespace ppsim {
namespace {

// Stage costs (and sums of their squares) within this relative distance of
// each other count as equal (see partition.h).
constexpr double kTolerance = 1e-9;

bool finite_non_negative(double x) { return std::isfinite(x) && x >= 0; }

}  // namespace

Result<std::vector<int>> partition_layers(const std::vector<double>& layer_cost, int stages,
                                          double first_extra, double last_extra) {
  const int num_layers = static_cast<int>(layer_cost.size());
  if (stages < 1) return Error{fmt::format("layer split: {} stages; need at least one", stages)};
  if (num_layers < stages) {
    return Error{
        fmt::format("layer split: {} layers over {} stages; every stage needs at least one layer",
                    num_layers, stages)};
  }
  for (int i = 0; i < num_layers; ++i) {
    if (!finite_non_negative(layer_cost[i])) {
      return Error{fmt::format("layer split: layer {} costs {}; expected a finite time >= 0", i,
                               layer_cost[i])};
    }
  }
  for (const auto& [value, name] : {std::pair{first_extra, "first stage's extra (embedding)"},
                                    std::pair{last_extra, "last stage's extra (logits)"}}) {
    if (!finite_non_negative(value)) {
      return Error{
          fmt::format("layer split: the {} costs {}; expected a finite time >= 0", name, value)};
    }
  }
  // Prefix sums: non-decreasing, since every cost is >= 0, so a stage's sum
  // below is never negative.
  std::vector<double> prefix(num_layers + 1, 0.0);
  for (int i = 0; i < num_layers; ++i) prefix[i + 1] = prefix[i] + layer_cost[i];
  // The squares of stage costs are summed below: they must not overflow.
  const double total = prefix[num_layers] + first_extra + last_extra;
  if (!std::isfinite(total * total)) {
    return Error{"layer split: the costs are too large; their sum squared overflows a double"};
  }
  // Stage k holding layers [i, j). The DPs and the reconstruction all call
  // this, so their comparisons are between identically computed doubles.
  auto cost = [&](int k, int i, int j) {
    double c = prefix[j] - prefix[i];
    if (k == 0) c += first_extra;
    if (k == stages - 1) c += last_extra;
    return c;
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto at = [&](int k, int i) { return static_cast<size_t>(k) * (num_layers + 1) + i; };
  const size_t size = static_cast<size_t>(stages) * (num_layers + 1);

  // 1. best[k][i]: the least possible largest cost of stages k..S-1 holding
  // layers [i, L), each at least one; infinity where too few layers are left.
  std::vector<double> best(size, kInf);
  for (int i = 0; i < num_layers; ++i) best[at(stages - 1, i)] = cost(stages - 1, i, num_layers);
  for (int k = stages - 2; k >= 0; --k) {
    const int stages_after = stages - 1 - k;
    for (int i = 0; i + stages_after < num_layers; ++i) {
      double b = kInf;
      for (int j = i + 1; j + stages_after <= num_layers; ++j) {
        b = std::min(b, std::max(cost(k, i, j), best[at(k + 1, j)]));
      }
      best[at(k, i)] = b;
    }
  }
  // The same sum of equal layers rounds differently at different offsets of
  // the prefix sums; a tolerance keeps such splits tied.
  const double limit = best[at(0, 0)] * (1 + kTolerance);

  // 2. spread[k][i]: the least sum of squared stage costs of stages k..S-1
  // holding layers [i, L) with every stage within `limit`; infinity if none.
  // A stage's cost grows with its last layer j, so the loops stop at the limit.
  std::vector<double> spread(size, kInf);
  for (int i = 0; i < num_layers; ++i) {
    const double c = cost(stages - 1, i, num_layers);
    if (c <= limit) spread[at(stages - 1, i)] = c * c;
  }
  for (int k = stages - 2; k >= 0; --k) {
    const int stages_after = stages - 1 - k;
    for (int i = 0; i + stages_after < num_layers; ++i) {
      double least = kInf;
      for (int j = i + 1; j + stages_after <= num_layers; ++j) {
        const double c = cost(k, i, j);
        if (c > limit) break;
        least = std::min(least, c * c + spread[at(k + 1, j)]);
      }
      spread[at(k, i)] = least;
    }
  }
  // The optimal split is within the limit, so some split is.
  PPSIM_CHECK(spread[at(0, 0)] < kInf);

  // 3. Each stage in turn takes the fewest layers that keep the least spread
  // (within the tolerance) reachable.
  const double slack = spread[at(0, 0)] * kTolerance;
  std::vector<int> result(stages);
  int i = 0;
  for (int k = 0; k + 1 < stages; ++k) {
    const int stages_after = stages - 1 - k;
    const double target = spread[at(k, i)] + slack;
    int j = i + 1;
    for (; j + stages_after <= num_layers; ++j) {
      const double c = cost(k, i, j);
      if (c <= limit && c * c + spread[at(k + 1, j)] <= target) break;
    }
    // spread[k][i] is finite, so some j reaches it.
    PPSIM_CHECK(j + stages_after <= num_layers);
    result[k] = j - i;
    i = j;
  }
  result[stages - 1] = num_layers - i;
  return result;
}

Result<std::vector<int>> balanced_layers(const Config& config) {
  const std::string where = config.source.empty() ? "" : config.source + ": ";
  if (!config.model) {
    return Error{where + "balancing the layer split needs a model: there are no layers to split"};
  }
  const int layers = config.model->layers;
  const int stages = config.model_stages();
  if (stages < 1 || layers < stages) {
    return Error{fmt::format(
        "{}model.layers ({}) is fewer than the pipeline stages {} ({}); every stage needs at "
        "least one layer",
        where, layers, config.model_stages_formula("p * v"), stages)};
  }
  if (!config.hardware) return layers_per_stage(layers, stages);
  const Result<PieceTimes> times = piece_times(config);
  if (!times.ok()) return Error{where + times.error().message};
  // The first moe.dense_layers are dense, the rest mixture-of-experts.
  std::vector<double> cost(layers, times->layer_s);
  if (config.model->moe) {
    std::fill(cost.begin() + config.model->moe->dense_layers, cost.end(), times->moe_layer_s);
  }
  return partition_layers(cost, stages, times->embedding_s, times->logits_s);
}

}  // namespace ppsim
