// The CostTable of a Config (build_cost_table): the analytic figures of
// cost_model_memory.cc, cost_model_time.cc and cost_model_comm.cc for the
// stages' layer split, the layer times of costs.profile in place of the
// analytic ones (cost_model_profile.cc), and each field of costs.fixed that
// is given replacing its counterpart.
#include "sim/cost/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost/cost_model_internal.h"

namespace ppsim {
namespace {

// Replaces a field of `count` entries with the values of one costs.fixed list
// (one value for all, or one per entry).
Status override_field(const std::vector<double>& values, const std::string& key, int count,
                      bool allow_one_fewer, const std::function<void(int, double)>& assign) {
  if (values.empty()) return Status();
  const int n = static_cast<int>(values.size());
  const int stages = allow_one_fewer ? count + 1 : count;
  if (n != 1 && n != stages && !(allow_one_fewer && n == count)) {
    return Error{"costs.fixed." + key + " has " + std::to_string(n) +
                 " values; give one, or one per stage (" + std::to_string(stages) + ")"};
  }
  for (double v : values) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return Error{"costs.fixed." + key + " must be finite and not negative, got " +
                   std::to_string(v)};
    }
  }
  for (int i = 0; i < count; ++i) assign(i, n == 1 ? values[0] : values[i]);
  return Status();
}

// Slice lengths as what share of a stage's fixed figures each slice takes:
// l / L of each, with L = sum of lengths.
struct SliceShares {
  std::vector<int> lengths;  // {1} when the microbatch is not cut
  int64_t total = 1;

  // `value` (per stage and microbatch) scaled to slice j; exact for the
  // whole, so an uncut table keeps the given figures to the bit.
  double share(double value, int j) const {
    if (lengths[j] == total) return value;
    return value * lengths[j] / static_cast<double>(total);
  }
};

Status apply_fixed(const FixedCosts& fixed, const SliceShares& shares, CostTable& table) {
  const int num_stages = table.num_stages();
  const int k = table.num_slices;
  // A per-stage figure is per microbatch: each slice takes its share,
  // rounded on its own.
  auto each_slice = [&](int stage, double v, auto&& assign) {
    for (int j = 0; j < k; ++j) assign(table.stages[stage * k + j], shares.share(v, j));
  };
  auto stage_field = [&](const std::vector<double>& values, const char* key, Picos StageCost::*f) {
    return override_field(values, key, num_stages, false, [&](int i, double v) {
      each_slice(i, v, [&](StageCost& cost, double x) { cost.*f = seconds_to_picos(x); });
    });
  };
  for (Status s : {stage_field(fixed.forward_s, "forward_s", &StageCost::forward),
                   stage_field(fixed.backward_s, "backward_s", &StageCost::backward),
                   stage_field(fixed.weight_grad_s, "weight_grad_s", &StageCost::weight_grad),
                   stage_field(fixed.forward_comm_s, "forward_comm_s", &StageCost::forward_comm),
                   stage_field(fixed.backward_comm_s, "backward_comm_s", &StageCost::backward_comm),
                   override_field(fixed.activation_bytes, "activation_bytes", num_stages, false,
                                  [&](int i, double v) {
                                    each_slice(i, v, [](StageCost& cost, double x) {
                                      cost.activation_bytes = bytes_to_int(x);
                                    });
                                  }),
                   override_field(fixed.weight_grad_bytes, "weight_grad_bytes", num_stages, false,
                                  [&](int i, double v) {
                                    each_slice(i, v, [](StageCost& cost, double x) {
                                      cost.weight_grad_bytes = bytes_to_int(x);
                                    });
                                  }),
                   // A list of one per stage gives boundary s its stage s entry.
                   // p2p_s is per transfer, so every slice's transfer takes all of it.
                   override_field(fixed.p2p_s, "p2p_s", num_stages - 1, true, [&](int i, double v) {
                     for (int j = 0; j < k; ++j) {
                       table.p2p_forward[i * k + j] = seconds_to_picos(v);
                       table.p2p_backward[i * k + j] = seconds_to_picos(v);
                     }
                   })}) {
    if (!s.ok()) return s;
  }
  for (StageCost& stage : table.stages) {
    // What I leaves for W may outgrow what F kept (a profile counts the
    // gradients I stashes for W), so a larger W part is no contradiction;
    // but the model's or the profile's W part does not outgrow a fixed
    // activation size it was not worked out for.
    if (!fixed.activation_bytes.empty() && fixed.weight_grad_bytes.empty()) {
      stage.weight_grad_bytes = std::min(stage.weight_grad_bytes, stage.activation_bytes);
    }
    if (stage.weight_grad > stage.backward) {
      // The user's own W larger than the user's own B is a contradiction; an
      // analytic W under a fixed, shorter B is capped at B. (Shares keep W <= B
      // per slice: scaling and rounding are monotone.)
      if (!fixed.weight_grad_s.empty()) {
        return Error{"costs.fixed.weight_grad_s exceeds backward_s; W is part of B"};
      }
      stage.weight_grad = stage.backward;
    }
    // Likewise the communication an overlapped pair may hide.
    if (!fixed.forward_comm_s.empty() && stage.forward_comm > stage.forward) {
      return Error{"costs.fixed.forward_comm_s exceeds forward_s; it is part of the forward"};
    }
    if (!fixed.backward_comm_s.empty() && stage.backward_comm > input_grad_time(stage)) {
      return Error{
          "costs.fixed.backward_comm_s exceeds backward_s less weight_grad_s; it is part of the "
          "input gradient"};
    }
    cap_communication(stage);
  }
  return Status();
}

// What the mixture-of-experts layers need, for configs the loader did not
// check (the explorer's candidates): sequence parallelism under tensor
// parallelism (moe_lacks_sequence_parallel); and a profile times only a
// dense layer.
Status check_moe(const Config& config) {
  if (!config.model->moe) return Status();
  if (moe_lacks_sequence_parallel(*config.model, config.parallel)) {
    return Error{"model.moe with parallel.tensor " + std::to_string(config.parallel.tensor) +
                 " needs parallel.sequence_parallel: true: the experts' all-to-all dispatch "
                 "routes each tensor rank's share of the sequence, as Megatron-Core requires"};
  }
  if (!config.profile_path.empty()) {
    return Error{
        "model.moe cannot be combined with costs.profile: a profile times a dense "
        "layer, not the router, experts and all-to-all exchanges of a MoE layer"};
  }
  return Status();
}

}  // namespace

namespace cost_model_internal {

namespace {

// The cut of one copy of the model (Config::model_stages): the config's
// explicit split (checked again here: a Config need not come from the
// loader; a stage may have none), else the even one.
Result<std::vector<int>> model_cut(const Config& config) {
  const int num_stages = config.model_stages();
  const std::vector<int>& given = config.parallel.layers_per_stage;
  if (given.empty()) return layers_per_stage(config.model->layers, num_stages);
  if (static_cast<int>(given.size()) != num_stages) {
    return Error{"parallel.layers_per_stage has " + std::to_string(given.size()) +
                 " entries; it needs one per stage, " + config.model_stages_formula("p * v") +
                 " = " + std::to_string(num_stages)};
  }
  int64_t sum = 0;
  for (int layers : given) {
    if (layers < 0) {
      return Error{"parallel.layers_per_stage has a stage of " + std::to_string(layers) +
                   " layers; expected 0 or more"};
    }
    sum += layers;
  }
  if (sum != config.model->layers) {
    return Error{"parallel.layers_per_stage sums to " + std::to_string(sum) +
                 " layers, but model.layers = " + std::to_string(config.model->layers)};
  }
  return given;
}

}  // namespace

Error in_source(const Config& config, const Status& status) {
  if (config.source.empty()) return Error{status.message()};
  return Error{config.source + ": " + status.message()};
}

// The cut, once per chain.
Result<std::vector<int>> stage_layers(const Config& config) {
  Result<std::vector<int>> cut = model_cut(config);
  if (!cut.ok() || config.num_chains() == 1) return cut;
  std::vector<int> layers;
  layers.reserve(config.num_stages());
  for (int chain = 0; chain < config.num_chains(); ++chain) {
    layers.insert(layers.end(), cut->begin(), cut->end());
  }
  return layers;
}

}  // namespace cost_model_internal

using cost_model_internal::apply_profile;
using cost_model_internal::fill_memory;
using cost_model_internal::fill_times;
using cost_model_internal::in_source;
using cost_model_internal::profiled_layers;
using cost_model_internal::ProfiledLayers;
using cost_model_internal::rank_sequence;
using cost_model_internal::Slice;
using cost_model_internal::stage_layers;

std::vector<int> layers_per_stage(int layers, int stages) {
  PPSIM_CHECK(stages > 0 && layers >= stages);
  const int base = layers / stages;
  const int extra = layers % stages;
  std::vector<int> result(stages, base);
  // The middle stages take the remainder: stages 1..extra, or every stage but
  // the last when there are more extra layers than middle stages.
  const int first = extra <= stages - 2 ? 1 : 0;
  for (int s = first; s < first + extra; ++s) ++result[s];
  return result;
}

std::vector<int> interleaved_stage_rank(int num_stages, int ranks) {
  std::vector<int> stage_rank(num_stages);
  for (int s = 0; s < num_stages; ++s) stage_rank[s] = s % ranks;
  return stage_rank;
}

Result<CostTable> build_cost_table(const Config& config, const std::vector<int>& stage_rank,
                                   const std::vector<int>& slice_lengths) {
  const int num_stages = config.num_stages();
  PPSIM_CHECK(static_cast<int>(stage_rank.size()) == num_stages);
  SliceShares shares;
  if (slice_lengths.empty()) {
    shares.lengths = {1};
  } else {
    shares.lengths = slice_lengths;
    shares.total = 0;
    for (size_t j = 0; j < slice_lengths.size(); ++j) {
      if (slice_lengths[j] <= 0) {
        return in_source(config, Error{"token slice " + std::to_string(j) + " has " +
                                       std::to_string(slice_lengths[j]) +
                                       " tokens; every slice of schedule.slices needs at least "
                                       "one"});
      }
      shares.total += slice_lengths[j];
    }
  }
  const int k = static_cast<int>(shares.lengths.size());
  CostTable table = uniform_costs(num_stages, config.parallel.pipeline, 0, 0, 0, 0, k);
  if (config.model) {
    if (Status s = check_moe(config); !s.ok()) return in_source(config, s);
    if (config.model->layers < config.model_stages() && config.parallel.layers_per_stage.empty()) {
      return in_source(config, Error{"model.layers (" + std::to_string(config.model->layers) +
                                     ") is fewer than the pipeline stages " +
                                     config.model_stages_formula("p * v") + " (" +
                                     std::to_string(config.model_stages()) +
                                     "); every stage needs at least one layer unless "
                                     "parallel.layers_per_stage leaves some empty"});
    }
    std::vector<Slice> slices;
    if (slice_lengths.empty()) {
      slices = {rank_sequence(*config.model, config.parallel)};
    } else {
      if (shares.total != config.model->seq_len) {
        return in_source(config, Error{"the token slices (schedule.slices) sum to " +
                                       std::to_string(shares.total) +
                                       " tokens, but a sequence has model.seq_len = " +
                                       std::to_string(config.model->seq_len)});
      }
      int64_t context = 0;
      for (int l : slice_lengths) {
        slices.push_back(Slice{l, context});
        context += l;
      }
    }
    const Result<std::vector<int>> split = stage_layers(config);
    if (!split.ok()) return in_source(config, split.error());
    const std::vector<int>& layers = *split;
    std::optional<ProfiledLayers> profiled;
    if (!config.profile_path.empty()) {
      Result<ProfiledLayers> read = profiled_layers(config, slices);
      if (!read.ok()) return in_source(config, read.error());
      profiled = std::move(*read);
    }
    fill_memory(config, layers, stage_rank, slices, table);
    if (config.hardware) {
      if (Status s = fill_times(config, layers, stage_rank, slices, table,
                                profiled ? &*profiled : nullptr);
          !s.ok()) {
        return in_source(config, s);
      }
    }
    if (profiled) apply_profile(config, layers, stage_rank, *profiled, table);
  }
  if (Status s = apply_fixed(config.fixed, shares, table); !s.ok()) return in_source(config, s);
  if (config.hardware) {
    const Picos overhead = seconds_to_picos(config.hardware->action_overhead_us * 1e-6);
    for (StageCost& stage : table.stages) stage.action_overhead = overhead;
  }
  return table;
}

}  // namespace ppsim
