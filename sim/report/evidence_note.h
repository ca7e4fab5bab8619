// What the reports say of how far the analytic model's figures can be
// trusted, from the published runs: that predictions of one workload closer
// than kRankingEvidence.close_gap are not reliably ordered
// (sim/plan/ranking_evidence.h: `ppsim explore`'s candidates, `ppsim
// compare`'s schedules), and how far the predictions of a mixture of
// experts and of context parallelism have been off
// (sim/plan/accuracy_evidence.h), and where the attention kernel's speed
// decides the prediction.
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

// For a config whose model has routed experts, priced by the analytic
// model: the published MoE runs' errors and what to do, ending in a
// newline; empty otherwise.
std::string moe_accuracy_note(const Config& config);

// For a config with context parallelism, priced by the analytic model: the
// published context-parallel runs' errors and what to do, ending in a
// newline; empty otherwise.
std::string context_accuracy_note(const Config& config);

// Where the fused attention kernel runs kAttentionHeavyShare of the model's
// FLOPs or more (attention_flop_share, sim/cost/cost_model.h) and the
// analytic model prices it: that share, and that the preset's flash
// efficiencies are one kernel and release's (cuDNN's releases alone differ
// by 10-25 % forward: docs/validation.md, NeMo's long-sequence runs),
// ending in a newline; empty otherwise. At a third of the FLOPs such a
// spread moves the iteration by about 5 %, the model's typical error on
// published runs: past it the kernel decides more than the rest.
inline constexpr double kAttentionHeavyShare = 1.0 / 3;
std::string attention_kernel_note(const Config& config);

// Every note above that applies to the config, in that order.
std::string accuracy_notes(const Config& config);

}  // namespace ppsim
