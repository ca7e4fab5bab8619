// Automatic zero-bubble scheduling (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, §3.2): instead of a handcrafted order, build a
// split-backward (F, I, W) schedule for the measured costs and a memory
// limit. Handcrafted orders (ZB-H1, ZB-H2) assume T_F = T_I = T_W and free
// communication; with uneven stages or slow links their W's land where no
// bubble is, or their warm-up is too short to cover the round trip.
//
// The paper's heuristic, without its ILP refinement: a few greedy list
// schedulers simulate time and, whenever a rank is idle, start the ready
// action a priority rule picks: an I whose gradient has arrived (the previous
// rank waits for it) or a forward (if the memory limit and a warm-up cap
// allow), else a W, which nobody waits for and so fills what would be a
// bubble. The variants differ in the cap, in which of I and F goes first, and
// in whether a W may start when it would still be running as the next known
// input arrives. ZB-H1 and ZB-H2 are candidates too. Each candidate is
// replayed by the engine and the fastest one within the limit is kept, so the
// figures that decide are the engine's, not the greedy's estimate.
//
// Lives in sim/ rather than schedules/ because judging candidates needs the
// engine and the cost table.
#pragma once

#include <cstdint>

#include "schedules/schedule.h"
#include "schedules/status.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"

namespace ppsim {

// A schedule named "zb-auto" for `ranks` ranks, one stage each (stage s on
// rank s), and `microbatches` microbatches, whose activation memory on every
// rank (the engine's peak_activation_bytes: F takes activation_bytes, I
// leaves weight_grad_bytes, which may be more, W gives those back) stays within
// `memory_limit_bytes`. Among the candidates that fit, the one with the
// smallest simulated iteration time (Timeline::period() when replayed with
// `judge`: one iteration's makespan by default, the steady period when
// several post-validated iterations are asked for); ties go to the first in
// a fixed order (ZB-H1 first), so the result is deterministic.
// REQUIRES: costs for `ranks` stages and ranks, num_slices == 1.
// Errors: sizes outside schedules/limits.h, and a limit below what one
// microbatch holds at most on some stage (nothing can run there).
Result<Schedule> make_zb_auto(int ranks, int microbatches, const CostTable& costs,
                              int64_t memory_limit_bytes, const RunOptions& judge = {});

}  // namespace ppsim
