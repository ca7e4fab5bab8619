#include "sim/report/evidence_note.h"

#include <fmt/format.h>

#include "sim/cost/cost_model.h"
#include "sim/plan/accuracy_evidence.h"
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

namespace {

// "`lead`: on N published `runs` the predicted iteration time was ... off
// the measured one (mean |error| ...; `why`; docs/validation.md,
// "`section`"). Calibrate ...", ending in a newline.
std::string accuracy_note(const char* lead, const char* runs, const AccuracyEvidence& e,
                          const char* why, const char* section) {
  return fmt::format(
      "{}: on {} published {} the predicted iteration time was {:+.0f} to {:+.0f} % off the "
      "measured one (mean |error| {:.0f} %; {}; docs/validation.md, \"{}\"). Calibrate the "
      "hardware preset to runs of your own (ppsim calibrate --measured).\n",
      lead, e.rows, runs, 100 * e.most_optimistic, 100 * e.most_pessimistic, 100 * e.mean_abs_error,
      why, section);
}

}  // namespace

std::string moe_accuracy_note(const Config& config) {
  if (!config.model || !config.model->moe || !analytic_layer_times(config)) return "";
  return accuracy_note(
      "Routed experts are priced with less evidence than dense layers", "mixture-of-experts runs",
      kMoeEvidence,
      "too fast with Megatron-Core, whose host's launches are fitted to one of them, too slow "
      "with NeMo AutoModel and DeepEP on H100",
      "Mixture of experts: the measured runs");
}

std::string context_accuracy_note(const Config& config) {
  if (config.parallel.context <= 1 || !analytic_layer_times(config)) return "";
  return accuracy_note(
      "Context parallelism is priced with less evidence than the rest of a layout",
      "runs with context parallelism", kContextEvidence,
      "too fast at long sequences, where the attention kernel and the context ring decide",
      "Context parallelism: the measured runs");
}

std::string attention_kernel_note(const Config& config) {
  if (!config.model || !analytic_layer_times(config)) return "";
  const double share = attention_flop_share(*config.model);
  if (share < kAttentionHeavyShare) return "";
  return fmt::format(
      "Attention is {:.0f} % of this model's FLOPs at {} tokens a sequence, so the attention "
      "kernel's speed decides as much of the prediction: the hardware preset's "
      "flash_forward_efficiency and flash_backward_efficiency are one kernel and release's "
      "figures, and releases of one library differ by 10-25 % (docs/cost_model.md, the table of "
      "kernels). Set them under hardware: for the kernel your framework runs.\n",
      100 * share, config.model->seq_len);
}

std::string accuracy_notes(const Config& config) {
  return moe_accuracy_note(config) + context_accuracy_note(config) + attention_kernel_note(config);
}

}  // namespace ppsim
