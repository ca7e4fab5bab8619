// What a table that ranks predictions of one workload (`ppsim explore`'s
// candidates, `ppsim compare`'s schedules) says about the close ones: the
// published runs' evidence (sim/plan/ranking_evidence.h) that the analytic
// model does not order predictions that close reliably.
#pragma once

#include <string>

#include "sim/config/config.h"

namespace ppsim {

// Whether the layer times are the analytic model's, which the evidence is
// about, rather than a measured profile's or fixed ones.
bool analytic_layer_times(const Config& config);

// `which` (e.g. "#1 to #3", "zb-h1 and zb-v") are predicted within
// kRankingEvidence.close_gap of each other: that sentence, the evidence and
// what to do, ending in a newline.
std::string close_ranking_note(const std::string& which);

}  // namespace ppsim
