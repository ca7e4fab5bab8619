// Applying a cost profile's calibration (the `calibration:` section,
// cost_profile.h; fitted by `ppsim calibrate`, docs/calibration.md) to the
// CostTable built from that profile. The simulator does it once the schedule
// is known, because the table has one `backward` figure for two uses: B
// takes all of it, I takes backward - weight_grad. A stage whose backwards
// are whole gets B' = s_B B + o_B; a stage whose backwards are split gets
// I' = s_I I + o_I and W' = s_W W + o_W, stored as backward = I' + W' and
// weight_grad = W'. Each rank's optimizer step becomes s_S step + o_S (in an
// asynchronous schedule that is the step's part of every S action). The
// link's calibration replaces every cross-rank transfer time with latency +
// bytes / bandwidth.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "schedules/action.h"
#include "schedules/schedule.h"
#include "schedules/status.h"
#include "sim/core/costs.h"
#include "sim/core/workload.h"
#include "sim/cost/cost_profile.h"

namespace ppsim {

// How a stage's backwards run: as B actions, or split into I and W.
enum class BackwardForm : uint8_t { kWhole, kSplit };

// Per stage of `schedule`: kSplit when any of its backwards is an I (a valid
// schedule splits all of a (stage, microbatch)'s or none; a stage that mixes
// the two across microbatches takes the split form, and its B actions then
// run I' + W').
std::vector<BackwardForm> backward_forms(const Schedule& schedule);
// The same form for every one of `num_stages` stages.
std::vector<BackwardForm> uniform_forms(int num_stages, BackwardForm form);

// The entry of an action kind: forward, backward, backward_input,
// backward_weight, and optimizer_step for S.
const std::optional<KindCalibration>& kind_entry(const Calibration& calibration, ActionKind kind);
std::optional<KindCalibration>& kind_entry(Calibration& calibration, ActionKind kind);

// Applies `calibration` to `table` (built for `stage_rank`, with `forms`, one
// per stage), leaving alone what `fixed` gives: costs.fixed.forward_s keeps
// F; backward_s or weight_grad_s keep B, I and W; p2p_s keeps the
// transfers. Durations are rounded to picoseconds once, after the affine
// map. An empty Calibration changes nothing.
// REQUIRES: forms.size() == stage_rank.size() == table.num_stages().
void apply_calibration(const Calibration& calibration, const std::vector<int>& stage_rank,
                       const std::vector<BackwardForm>& forms, const FixedCosts& fixed,
                       CostTable& table);

// What a simulation of `config` applies: `given` when not null (a fit being
// cross-validated), else the calibration of its profile (costs.profile; the
// profile is read again here), else nothing (an empty Calibration).
Result<Calibration> calibration_for(const Config& config, const Calibration* given);

// `outer` applied after `inner`, as one calibration: per kind
// s = s_o s_i and o = s_o o_i + o_o (an absent entry is the identity), and
// `outer`'s link, or else `inner`'s (a link fit replaces, it does not
// compose: it is fitted on bytes, not on predicted times).
Calibration compose(const Calibration& outer, const Calibration& inner);

}  // namespace ppsim
