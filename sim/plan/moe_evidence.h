// How far the analytic cost model's mixture-of-experts predictions have been
// from measured runs: every published row whose model has routed experts
// (configs/published/*/measured.csv; docs/validation.md, "Mixture of
// experts: the measured runs"). Reports quote it for a config with experts
// (sim/report/evidence_note.h). PublishedRuns.MoeEvidenceIsWhatTheMixtureRowsShow
// recomputes it from the shipped files and fails when it changes.
#pragma once

namespace ppsim {

struct MoeEvidence {
  int rows;
  double mean_abs_error;   // of (predicted - measured) / measured
  double most_optimistic;  // the lowest error (negative: predicted faster)
  double most_pessimistic;
};

// 2026-12-05, shipped presets, the host's launches priced
// (host_launch_us 44, fitted to Megatron-Bridge's Qwen3 30B-A3B on 8 B200,
// -0.9 % with its router's CUDA graph) and the H100's attention at cuDNN's
// speed: NeMo AutoModel's four runs on H100 with DeepEP, +12 to +26 %;
// Megatron-Bridge's Qwen3 30B-A3B on H100, -14 %; its three other runs on
// B200 and GB200 at MXFP8, -20 to -24 %.
inline constexpr MoeEvidence kMoeEvidence{9, 0.180, -0.236, 0.263};

}  // namespace ppsim
