// Schedule generators: from (p ranks, m microbatches, v virtual stages) to the
// per-rank programs of a known schedule family.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/schedule.h"
#include "schedules/schedule_kind.h"

namespace ppsim {

struct ScheduleParams {
  int ranks = 1;           // p
  int microbatches = 1;    // m
  int virtual_stages = 1;  // v: stages per rank
  int slices = 1;          // token slices per microbatch (terapipe)
  // pipedream-2bw: microbatches per optimizer step (the batch); the stream of
  // `microbatches` holds several such batches.
  int step_every = 1;
};

// GPipe: all forwards, then all backwards (in reverse microbatch order, as the
// activations of the last forward are the freshest). Needs v == 1.
Result<Schedule> make_gpipe(const ScheduleParams& params);
// 1F1B (PipeDream-Flush): rank i runs min(p-1-i, m) warm-up forwards, then
// alternates one forward and one backward, then drains. Needs v == 1.
Result<Schedule> make_1f1b(const ScheduleParams& params);
// Interleaved 1F1B in Megatron-LM's order; stage = chunk * p + rank.
// Needs m % p == 0.
Result<Schedule> make_interleaved_1f1b(const ScheduleParams& params);
// TeraPipe (Li et al. 2021): each microbatch's sequence is cut into k token
// slices that flow through the stages one after another, GPipe-style: all
// forwards (microbatch by microbatch, slices in order), then all backwards
// in the exact reverse order (a slice's backward needs the later slices'
// backward on its stage). Needs v == 1.
Result<Schedule> make_terapipe(const ScheduleParams& params);

// Stages per rank a kind always runs (1 for GPipe, 1F1B and zb-auto, 2 for
// the V shapes), or nullopt when it takes any v (interleaved 1F1B, looped
// BFS, interleaved zero bubble, and custom, whose file says).
std::optional<int> fixed_virtual_stages(ScheduleKind kind);

// PipeDream (Narayanan et al. 2019), the asynchronous 1F1B: no flush, and an
// optimizer step (S) after every backward, on weights that each microbatch
// stashes at its forward. `microbatches` is the length of the stream: rank i
// warms up with p-1-i forwards once, then alternates F, B, S. Needs v == 1.
Result<Schedule> make_pipedream(const ScheduleParams& params);
// PipeDream-2BW (Narayanan et al. 2021): the same stream, but gradients
// accumulate over `step_every` microbatches and each stage steps once per
// batch, so two weight versions suffice. Needs step_every >= p (fewer would
// leave microbatches in flight across two updates) and dividing microbatches.
Result<Schedule> make_pipedream_2bw(const ScheduleParams& params);
// True for the kinds whose programs step inside them, without a flush.
bool is_asynchronous(ScheduleKind kind);

// Generates a schedule of one of generated_schedule_kinds(); an error for
// zb-auto and custom, which are not generated from (p, m, v) alone.
Result<Schedule> make_schedule(ScheduleKind kind, const ScheduleParams& params);

}  // namespace ppsim
