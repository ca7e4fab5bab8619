#include "sim/report/evidence_note.h"

#include <fmt/format.h>

#include "sim/plan/moe_evidence.h"
#include "sim/plan/ranking_evidence.h"

namespace ppsim {

bool analytic_layer_times(const Config& config) {
  return config.profile_path.empty() && config.fixed.forward_s.empty() &&
         config.fixed.backward_s.empty();
}

std::string close_ranking_note(const std::string& which) {
  const RankingEvidence& e = kRankingEvidence;
  return fmt::format(
      "{} are predicted within {:.0f} % of each other, closer than the model reliably ranks.\n"
      "On published runs it ordered {} of {} pairs of layouts or schedules predicted that close "
      "as measured ({:.0f} %), {} of {} pairs further apart ({:.0f} %; docs/validation.md, "
      "\"Telling layouts apart\"). Measure the close ones, or calibrate the hardware preset to "
      "runs of your own (ppsim calibrate --measured).\n",
      which, 100 * e.close_gap, e.close_in_order, e.close_pairs,
      100.0 * e.close_in_order / e.close_pairs, e.far_in_order, e.far_pairs,
      100.0 * e.far_in_order / e.far_pairs);
}

std::string moe_accuracy_note(const Config& config) {
  if (!config.model || !config.model->moe || !analytic_layer_times(config)) return "";
  const MoeEvidence& e = kMoeEvidence;
  return fmt::format(
      "Routed experts are priced with less evidence than dense layers: on {} published "
      "mixture-of-experts runs the predicted iteration time was {:+.0f} to {:+.0f} % off the "
      "measured one (mean |error| {:.0f} %; too fast with Megatron-Core, whose host's "
      "launches are fitted to one of them, too slow with NeMo AutoModel and DeepEP on H100; "
      "docs/validation.md, \"Mixture of experts: the measured runs\"). Calibrate the hardware "
      "preset to runs of your own (ppsim calibrate --measured).\n",
      e.rows, 100 * e.most_optimistic, 100 * e.most_pessimistic, 100 * e.mean_abs_error);
}

}  // namespace ppsim
