// costs.profile: the layer times (and, where measured, the bytes a layer
// holds) of a cost profile in place of the analytic model's, and its
// "thread-copy" link for the pipeline transfers. docs/cost_model.md,
// "costs.profile", says what stays analytic.
#include <fmt/format.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/cost_model.h"
#include "sim/cost_model_internal.h"
#include "sim/cost_profile.h"

namespace ppsim {
namespace cost_model_internal {
namespace {

// The link the CPU profiler measures: a buffer handed to another thread,
// which is what the threads runtime pays for each transfer.
constexpr std::string_view kThreadCopyLink = "thread-copy";

// The shape of a config's layer as the profile's kernels name it.
struct KernelShape {
  int micro_batch, hidden, ffn, heads, tensor;

  bool matches(const KernelSample& k) const {
    return k.micro_batch == micro_batch && k.hidden == hidden && k.ffn == ffn && k.heads == heads &&
           k.tensor == tensor;
  }
};

// One byte figure (activation_bytes or weight_grad_bytes) of the forward
// sample at exactly (tokens, context): bytes are not interpolated, since a
// slice's attention rows do not scale linearly with its tokens. 0 when the
// profile measured it at no (tokens, context) of this shape; an error,
// naming the measured ones, when it did but not at this one.
Result<int64_t> measured_bytes(const CostProfile& profile, const KernelShape& shape,
                               const Slice& slice, int64_t KernelSample::*field,
                               std::string_view key) {
  std::set<std::pair<int, int>> measured;
  for (const KernelSample& k : profile.kernels) {
    if (k.kind != "forward" || !shape.matches(k) || k.*field == 0) continue;
    if (k.tokens == slice.tokens && k.context == slice.context) return k.*field;
    measured.emplace(k.tokens, k.context);
  }
  if (measured.empty()) return int64_t{0};
  std::vector<std::string> points;
  for (const auto& [tokens, context] : measured) {
    points.push_back(fmt::format("({}, {})", tokens, context));
  }
  return Error{fmt::format(
      "forward {} was measured at (tokens, context) {} but not at ({}, {}), which this config "
      "needs; bytes are not interpolated, so profile that slice too",
      key, fmt::join(points, ", "), slice.tokens, slice.context)};
}

}  // namespace

Result<ProfiledLayers> profiled_layers(const Config& config, const std::vector<Slice>& slices) {
  const std::string& path = config.profile_path;
  const Result<CostProfile> loaded = load_profile(path);
  if (!loaded.ok()) return loaded.error();  // its messages name the file
  const CostProfile& profile = *loaded;
  const Recompute recompute = config.training.recompute;
  if (recompute == Recompute::kSelective) {
    return Error{fmt::format(
        "{}: training.recompute selective: a profile has no kernel for the attention core "
        "alone; use none or full",
        path)};
  }
  const ModelSpec& model = *config.model;
  const KernelShape shape{config.training.micro_batch, model.hidden, ffn_of(model), model.heads,
                          config.parallel.tensor};
  ProfiledLayers out;
  for (const Slice& slice : slices) {
    const int tokens = static_cast<int>(slice.tokens);
    const int context = static_cast<int>(slice.context);
    auto time = [&](std::string_view kind) -> Result<Picos> {
      const Result<Interpolated> t =
          kernel_time(profile, kind, shape.micro_batch, shape.hidden, shape.ffn, shape.heads,
                      shape.tensor, tokens, context);
      if (!t.ok()) return Error{fmt::format("{}: {}", path, t.error().message)};
      return seconds_to_picos(t->seconds);
    };
    LayerTimes layer;
    for (auto [kind, out_field] :
         {std::pair{"forward", &LayerTimes::forward}, std::pair{"backward", &LayerTimes::backward},
          std::pair{"backward_weight", &LayerTimes::weight_grad}}) {
      const Result<Picos> t = time(kind);
      if (!t.ok()) return t.error();
      layer.*out_field = *t;
    }
    if (recompute == Recompute::kFull) {  // the forward again, before the backward
      const Result<Picos> t = time("recompute");
      if (!t.ok()) return t.error();
      layer.backward += *t;
    }
    out.times.push_back(layer);

    // The profiled block keeps everything for backward: its bytes are this
    // config's only without recompute (with full recompute the model's stay).
    int64_t activation = 0, weight_grad = 0;
    if (recompute == Recompute::kNone) {
      for (auto [field, key, result] :
           {std::tuple{&KernelSample::activation_bytes, "activation_bytes", &activation},
            std::tuple{&KernelSample::weight_grad_bytes, "weight_grad_bytes", &weight_grad}}) {
        const Result<int64_t> bytes = measured_bytes(profile, shape, slice, field, key);
        if (!bytes.ok()) return Error{fmt::format("{}: {}", path, bytes.error().message)};
        *result = *bytes;
      }
    }
    out.activation_bytes.push_back(activation);
    out.weight_grad_bytes.push_back(weight_grad);
  }
  for (const LinkFit& link : profile.links) {
    if (link.name != kThreadCopyLink) continue;
    out.has_link = true;
    out.link = Link{link.latency_s, link.bandwidth_Bps};
  }
  return out;
}

void apply_profile(const Config& config, const std::vector<int>& layers,
                   const std::vector<int>& stage_rank, const ProfiledLayers& profiled,
                   CostTable& table) {
  const int k = static_cast<int>(profiled.times.size());
  for (int s = 0; s < config.num_stages(); ++s) {
    for (int j = 0; j < k; ++j) {
      StageCost& cost = table.stages[s * k + j];
      // With hardware, fill_times timed the layers from the profile already,
      // next to the analytic embedding and logits; without, layers are all.
      if (!config.hardware) {
        const LayerTimes& layer = profiled.times[j];
        cost.forward = layers[s] * layer.forward;
        cost.backward = layers[s] * layer.backward;
        cost.weight_grad = layers[s] * layer.weight_grad;
      }
      if (profiled.activation_bytes[j] > 0) {
        cost.activation_bytes = layers[s] * profiled.activation_bytes[j];
      }
      if (profiled.weight_grad_bytes[j] > 0) {
        cost.weight_grad_bytes = layers[s] * profiled.weight_grad_bytes[j];
      }
    }
  }
  if (!profiled.has_link) return;
  for (int s = 0; s + 1 < config.num_stages(); ++s) {
    if (stage_rank[s] == stage_rank[s + 1]) continue;  // handed over in memory
    for (int j = 0; j < k; ++j) {
      const int i = s * k + j;
      const Picos t =
          seconds_to_picos(profiled.link.latency_s +
                           static_cast<double>(table.p2p_bytes[i]) / profiled.link.bandwidth_Bps);
      table.p2p_forward[i] = t;
      table.p2p_backward[i] = t;
    }
  }
}

}  // namespace cost_model_internal
}  // namespace ppsim
