#include "sim/report/ranking_note.h"

#include <fmt/format.h>

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

}  // namespace ppsim
