// How far apart two predictions of one workload must be for the analytic
// cost model to order them as they would be measured: what the published
// runs with several layouts or schedules of one workload show
// (configs/published/*/measured.csv, the `group` column: the BLOOM 181B
// layout sweep, Zero Bubble's four schedules, Korthikanti et al.'s two
// recompute methods, Megatron-Bridge's two FP8 recipes on Blackwell;
// docs/validation.md, "Telling layouts apart").
// `ppsim explore` says which ranked candidates are closer than that to the
// best; `ppsim calibrate --measured` counts the pairs of a file either side
// of it. PublishedRuns.RankingEvidenceIsWhatTheGroupsShow recomputes the
// counts from the shipped files and fails when they change.
#pragma once

namespace ppsim {

struct RankingEvidence {
  // Two predicted iteration times are close when (longer - shorter) / shorter
  // is below this.
  double close_gap;
  // Pairs of rows of one group with different measured times, predicted
  // close, and of them those measured in the predicted order.
  int close_pairs;
  int close_in_order;
  // Likewise, predicted close_gap or more apart.
  int far_pairs;
  int far_in_order;
};

// 2026-12-04, shipped presets: below 5 % under two thirds in order (a coin
// gives half), from 5 % on 94 %.
inline constexpr RankingEvidence kRankingEvidence{0.05, 76, 50, 138, 130};

// (longer - shorter) / shorter; both positive.
inline double relative_gap(double a_s, double b_s) {
  return a_s > b_s ? (a_s - b_s) / b_s : (b_s - a_s) / a_s;
}

}  // namespace ppsim
