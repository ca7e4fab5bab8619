#include "sim/cost/calibration.h"

#include <algorithm>
#include <cmath>

namespace ppsim {

std::vector<BackwardForm> backward_forms(const Schedule& schedule) {
  std::vector<BackwardForm> forms(schedule.num_stages, BackwardForm::kWhole);
  for (const std::vector<Action>& program : schedule.programs) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kBackwardInput) forms[a.stage] = BackwardForm::kSplit;
    }
  }
  return forms;
}

std::vector<BackwardForm> uniform_forms(int num_stages, BackwardForm form) {
  return std::vector<BackwardForm>(num_stages, form);
}

namespace {

template <typename C>
auto& entry_of(C& calibration, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return calibration.forward;
    case ActionKind::kBackward:
      return calibration.backward;
    case ActionKind::kBackwardInput:
      return calibration.backward_input;
    case ActionKind::kBackwardWeight:
      return calibration.backward_weight;
    case ActionKind::kStep:
      break;
  }
  return calibration.optimizer_step;
}

// scale * t + overhead, rounded once; t itself when there is no entry.
Picos affine(Picos t, const std::optional<KindCalibration>& c) {
  if (!c) return t;
  return duration_to_picos(c->scale * static_cast<double>(t) +
                           c->overhead_s * static_cast<double>(kPicosPerSecond));
}

void calibrate_backward(BackwardForm form, const Calibration& calibration, StageCost& c) {
  if (form == BackwardForm::kSplit) {
    const Picos input = affine(input_grad_time(c), calibration.backward_input);
    c.weight_grad = affine(c.weight_grad, calibration.backward_weight);
    c.backward_overlap = std::min({c.backward_overlap, c.weight_grad, input});
    c.backward = input + c.weight_grad - c.backward_overlap;
  } else if (const std::optional<KindCalibration>& b = calibration.backward) {
    // W is not timed on its own here; it keeps its share of B (o >= 0
    // keeps it within B'), and the overlap its share, so that an I alone
    // is scaled as B is.
    c.weight_grad = duration_to_picos(b->scale * static_cast<double>(c.weight_grad));
    c.backward_overlap = duration_to_picos(b->scale * static_cast<double>(c.backward_overlap));
    c.backward = affine(c.backward, b);
  }
}

}  // namespace

const std::optional<KindCalibration>& kind_entry(const Calibration& calibration, ActionKind kind) {
  return entry_of(calibration, kind);
}

std::optional<KindCalibration>& kind_entry(Calibration& calibration, ActionKind kind) {
  return entry_of(calibration, kind);
}

void apply_calibration(const Calibration& calibration, const std::vector<int>& stage_rank,
                       const std::vector<BackwardForm>& forms, const FixedCosts& fixed,
                       CostTable& table) {
  const int num_stages = table.num_stages();
  const int k = table.num_slices;
  PPSIM_CHECK(static_cast<int>(forms.size()) == num_stages);
  PPSIM_CHECK(static_cast<int>(stage_rank.size()) == num_stages);
  const bool backward_fixed = !fixed.backward_s.empty() || !fixed.weight_grad_s.empty();
  for (int s = 0; s < num_stages; ++s) {
    for (int j = 0; j < k; ++j) {
      StageCost& c = table.stages[s * k + j];
      if (fixed.forward_s.empty()) c.forward = affine(c.forward, calibration.forward);
      if (!backward_fixed) calibrate_backward(forms[s], calibration, c);
      cap_communication(c);
    }
  }
  for (Picos& step : table.optimizer_step) step = affine(step, calibration.optimizer_step);
  if (!calibration.link || !fixed.p2p_s.empty()) return;
  const LinkCalibration& link = *calibration.link;
  for (int s = 0; s + 1 < num_stages; ++s) {
    if (stage_rank[s] == stage_rank[s + 1]) continue;  // handed over in memory
    for (int j = 0; j < k; ++j) {
      const int i = s * k + j;
      const Picos t = seconds_to_picos(link.latency_s + static_cast<double>(table.p2p_bytes[i]) /
                                                            link.bandwidth_Bps);
      table.p2p_forward[i] = t;
      table.p2p_backward[i] = t;
    }
  }
}

Result<Calibration> calibration_for(const Config& config, const Calibration* given) {
  if (given != nullptr) return *given;
  if (config.profile_path.empty()) return Calibration{};
  Result<CostProfile> profile = load_profile(config.profile_path);
  if (!profile.ok()) {  // named as build_cost_table names it: the config, then the profile
    if (config.source.empty()) return profile.error();
    return Error{config.source + ": " + profile.error().message};
  }
  return profile->calibration.value_or(Calibration{});
}

Calibration compose(const Calibration& outer, const Calibration& inner) {
  Calibration out;
  for (const auto& [key, entry] : kCalibratedKinds) {
    const std::optional<KindCalibration>& o = outer.*entry;
    const std::optional<KindCalibration>& i = inner.*entry;
    if (!o || !i) {
      out.*entry = o ? o : i;
      continue;
    }
    out.*entry = KindCalibration{o->scale * i->scale, o->scale * i->overhead_s + o->overhead_s};
  }
  out.link = outer.link ? outer.link : inner.link;
  return out;
}

}  // namespace ppsim
