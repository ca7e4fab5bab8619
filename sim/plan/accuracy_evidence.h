// How far the analytic cost model's predictions have been from measured
// runs where its evidence is thinnest: every published row whose model has
// routed experts, and every one whose layout has context parallelism
// (configs/published/*/measured.csv; docs/validation.md, "Mixture of
// experts: the measured runs" and "Context parallelism: the measured
// runs"). Reports quote them for a config of the kind
// (sim/report/evidence_note.h). PublishedRuns.MoeEvidenceIsWhatTheMixtureRowsShow
// and PublishedRuns.ContextEvidenceIsWhatTheContextRowsShow recompute them
// from the shipped files and fail when they change.
#pragma once

namespace ppsim {

struct AccuracyEvidence {
  int rows;
  double mean_abs_error;   // of (predicted - measured) / measured
  double most_optimistic;  // the lowest error (negative: predicted faster)
  double most_pessimistic;
};

// 2026-12-05, shipped presets, the host's launches priced
// (host_launch_us 44, fitted to Megatron-Bridge's Qwen3 30B-A3B on 8 B200,
// -0.7 % with its router's CUDA graph), the H100's attention at cuDNN's
// speed and Blackwell's at cuDNN's on a GB200: NeMo AutoModel's four runs
// on H100 with DeepEP, +12 to +26 %; Megatron-Bridge's Qwen3 30B-A3B on
// H100, -14 %; its three other runs on B200 and GB200 at MXFP8, -16 to
// -22 %.
inline constexpr AccuracyEvidence kMoeEvidence{9, 0.169, -0.221, 0.263};

// 2026-12-05, shipped presets, the H100's attention at cuDNN's speed and
// the context ring's copies and sums priced: NeMo's Llama 2 7B at 32K to 1M
// tokens (CP 2-32), -5 to -13 %; Llama 3 405B's long-context run (CP 16,
// all-gather, its attention FlashAttention-2's), +5 %; the CP 2 rows at 8K
// tokens of NeMo 24.07, Megatron-Bridge and NeMo AutoModel, -12 to +4 %.
inline constexpr AccuracyEvidence kContextEvidence{14, 0.072, -0.130, 0.049};

}  // namespace ppsim
