// costs.profile: the times (and, where measured, the bytes held) of a cost
// profile's layer, embedding and head in place of the analytic model's, and
// its link for the pipeline transfers (costs.link, else "thread-copy", else
// "device-to-device"). docs/cost_model.md, "costs.profile", says what stays
// analytic.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/cost_model_internal.h"
#include "sim/cost/cost_profile.h"

namespace ppsim {
namespace cost_model_internal {
namespace {

// The links that stand for the pipeline's transfers, in order of
// preference: the CPU profiler's buffer handed to another thread (what the
// threads runtime pays for each transfer), and the GPU profiler's copy
// between two buffers of one device (what the CUDA runtime pays, its ranks
// sharing one GPU).
constexpr std::array<std::string_view, 2> kPipelineLinks = {"thread-copy", "device-to-device"};

// One byte figure (activation_bytes or weight_grad_bytes) of the forward
// sample of a piece at exactly (tokens, context): bytes are not
// interpolated, since a slice's attention rows do not scale linearly with its
// tokens. 0 when the profile measured it at no (tokens, context) of this
// shape; an error, naming the measured ones, when it did but not at this one.
Result<int64_t> measured_bytes(const CostProfile& profile, const KernelShape& shape,
                               const Slice& slice, int64_t KernelSample::*field,
                               std::string_view key) {
  std::set<std::pair<int, int>> measured;
  for (const KernelSample& k : profile.kernels) {
    if (k.kind != KernelKind::kForward || !shape.matches(k) || k.*field == 0) continue;
    if (k.tokens == slice.tokens && k.context == slice.context) return k.*field;
    measured.emplace(k.tokens, k.context);
  }
  if (measured.empty()) return int64_t{0};
  std::vector<std::string> points;
  for (const auto& [tokens, context] : measured) {
    points.push_back(fmt::format("({}, {})", tokens, context));
  }
  const std::string what = shape.part == KernelPart::kBlock
                               ? "forward"
                               : fmt::format("{} forward", to_string(shape.part));
  return Error{fmt::format(
      "{} {} was measured at (tokens, context) {} but not at ({}, {}), which this config "
      "needs; bytes are not interpolated, so profile that slice too",
      what, key, fmt::join(points, ", "), slice.tokens, slice.context)};
}

// One piece of the config's stages (`shape` picks which) for one slice.
Result<MeasuredPiece> measured_piece(const CostProfile& profile, const KernelShape& shape,
                                     const Slice& slice, Recompute recompute) {
  const int tokens = static_cast<int>(slice.tokens);
  const int context = static_cast<int>(slice.context);
  auto time = [&](KernelKind kind) -> Result<Picos> {
    const Result<Interpolated> t = kernel_time(profile, kind, shape, tokens, context);
    if (!t.ok()) return t.error();
    return seconds_to_picos(t->seconds);
  };
  MeasuredPiece piece;
  for (auto [kind, out_field] :
       {std::pair{KernelKind::kForward, &MeasuredPiece::forward},
        std::pair{KernelKind::kBackward, &MeasuredPiece::backward},
        std::pair{KernelKind::kBackwardWeight, &MeasuredPiece::weight_grad}}) {
    const Result<Picos> t = time(kind);
    if (!t.ok()) return t.error();
    piece.*out_field = *t;
  }
  // A layer runs its forward again before its backward; the embedding and
  // head keep what they need.
  if (recompute == Recompute::kFull && shape.part == KernelPart::kBlock) {
    const Result<Picos> t = time(KernelKind::kRecompute);
    if (!t.ok()) return t.error();
    piece.backward = duration_plus(piece.backward, *t);
  }
  // The profiled pieces keep everything: their bytes are this config's only
  // without recompute (with full recompute the model's stay).
  if (recompute == Recompute::kNone) {
    for (auto [field, key, result] :
         {std::tuple{&KernelSample::activation_bytes, "activation_bytes",
                     &MeasuredPiece::activation_bytes},
          std::tuple{&KernelSample::weight_grad_bytes, "weight_grad_bytes",
                     &MeasuredPiece::weight_grad_bytes}}) {
      const Result<int64_t> bytes = measured_bytes(profile, shape, slice, field, key);
      if (!bytes.ok()) return bytes.error();
      piece.*result = *bytes;
    }
  }
  return piece;
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
  const int b = config.training.micro_batch;
  const int t = config.parallel.tensor;
  ProfiledLayers out;
  // The layer always; the embedding and the head where the profile has any
  // kernel of theirs (it must then have this config's shape).
  for (const auto& [name, list] : {std::pair{KernelPart::kBlock, &out.layer},
                                   std::pair{KernelPart::kEmbedding, &out.embedding},
                                   std::pair{KernelPart::kHead, &out.head}}) {
    const KernelPart part = name;  // a lambda below captures it (clang 14: not a binding)
    auto* const pieces = list;
    const bool present = part == KernelPart::kBlock ||
                         std::any_of(profile.kernels.begin(), profile.kernels.end(),
                                     [&](const KernelSample& k) { return k.part == part; });
    if (!present) continue;
    const KernelShape shape =
        part == KernelPart::kBlock
            ? KernelShape{part, b, model.hidden, model.ffn(), model.heads, 0, t}
            : KernelShape{part, b, model.hidden, 0, 0, model.vocab, t};
    for (const Slice& slice : slices) {
      const Result<MeasuredPiece> piece = measured_piece(profile, shape, slice, recompute);
      if (!piece.ok()) return Error{fmt::format("{}: {}", path, piece.error().message)};
      pieces->push_back(*piece);
    }
  }
  const KernelShape block{KernelPart::kBlock, b, model.hidden, model.ffn(), model.heads, 0, t};
  for (const KernelSample& k : profile.kernels) {
    if (k.kind == KernelKind::kOptimizerStep && block.matches(k)) {
      out.block_step = seconds_to_picos(k.median_s);
      break;
    }
  }
  const auto find_link = [&](std::string_view name) {
    return std::find_if(profile.links.begin(), profile.links.end(),
                        [&](const LinkFit& l) { return l.name == name; });
  };
  if (!config.profile_link.empty()) {
    const auto link = find_link(config.profile_link);
    if (link == profile.links.end()) {
      std::vector<std::string> names;
      for (const LinkFit& l : profile.links) names.push_back(l.name);
      return Error{fmt::format("{}: costs.link {}: the profile has no such link (it has: {})", path,
                               config.profile_link,
                               names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")))};
    }
    out.has_link = true;
    out.link = Link{link->latency_s, link->bandwidth_Bps};
    return out;
  }
  for (std::string_view name : kPipelineLinks) {
    const auto link = find_link(name);
    if (link == profile.links.end()) continue;
    out.has_link = true;
    out.link = Link{link->latency_s, link->bandwidth_Bps};
    break;
  }
  return out;
}

void apply_profile(const Config& config, const std::vector<int>& layers,
                   const std::vector<int>& stage_rank, const ProfiledLayers& profiled,
                   CostTable& table) {
  const int k = static_cast<int>(profiled.layer.size());
  const int last = config.num_stages() - 1;
  for (int s = 0; s <= last; ++s) {
    for (int j = 0; j < k; ++j) {
      StageCost& cost = table.stages[s * k + j];
      const MeasuredPiece& layer = profiled.layer[j];
      // The layers' bytes replace the model's where measured.
      if (layer.activation_bytes > 0) cost.activation_bytes = layers[s] * layer.activation_bytes;
      if (layer.weight_grad_bytes > 0) {
        cost.weight_grad_bytes = layers[s] * layer.weight_grad_bytes;
      }
      // With hardware, fill_times timed the stage from the profile already
      // (and the pieces it lacks analytically); without, the profile's
      // pieces are all.
      if (!config.hardware) {
        cost.forward = duration_times(layer.forward, layers[s]);
        cost.backward = duration_times(layer.backward, layers[s]);
        cost.weight_grad = duration_times(layer.weight_grad, layers[s]);
      }
      // The model counts neither the embedding's nor the head's bytes.
      for (const MeasuredPiece* piece :
           {config.first_of_chain(s) ? profiled.embedding_at(j) : nullptr,
            config.last_of_chain(s) ? profiled.head_at(j) : nullptr}) {
        if (piece == nullptr) continue;
        cost.activation_bytes += piece->activation_bytes;
        cost.weight_grad_bytes += piece->weight_grad_bytes;
        if (config.hardware) continue;
        cost.forward = duration_plus(cost.forward, piece->forward);
        cost.backward = duration_plus(cost.backward, piece->backward);
        cost.weight_grad = duration_plus(cost.weight_grad, piece->weight_grad);
      }
    }
  }
  // A measured step replaces the model's: each rank updates its stages'
  // blocks (the embedding's and head's weights are not in it), a 1/d share
  // of them with ZeRO, as the model counts.
  if (profiled.block_step) {
    std::fill(table.optimizer_step.begin(), table.optimizer_step.end(), Picos{0});
    for (int s = 0; s <= last; ++s) {
      table.optimizer_step[stage_rank[s]] += layers[s] * *profiled.block_step;
    }
    if (config.training.zero_stage >= 1) {
      for (Picos& step : table.optimizer_step) step /= config.parallel.data;
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
