// Validation of a Schedule before anyone executes it: every (microbatch,
// stage, slice) has exactly one forward and one backward (B, or I and W) on
// the rank that owns the stage, and the programs cannot deadlock.
//
// Dependencies are derived, never stored: F(mb,s) needs F(mb,s-1); B or I
// (mb,s) needs the input gradient of (mb,s+1) and F(mb,s) (within the
// microbatch's chain of stages, Schedule::num_chains); W(mb,s) needs
// I(mb,s); a step S(mb,s) needs the weight gradient of (mb,s); and each
// program runs in order. With token slices, slice j of a
// stage also needs slice j-1's forward on that stage (its keys and values:
// causal attention) and slice j+1's backward there (the gradient that later
// slices send back to its keys and values). An overlapped pair
// (Action::overlaps_next) starts only when both its actions may, so its
// forward also waits for what its backward waits for. A cycle in that graph
// is a deadlock, reported as the cycle of actions: "1B0 -> 0B0 -> 0F1 -> 1B0".
#pragma once

#include "schedules/action_index.h"
#include "schedules/schedule.h"

namespace ppsim {

Status validate(const Schedule& schedule);
// All of validate() but the deadlock search, in time linear in the actions:
// what the engine needs to replay a schedule, and checks before it does.
// A generated schedule is checked only this far; should it deadlock after
// all, the engine stalls and reports validate()'s cycle. Where `numbered`
// is given and the schedule is covered, it is left holding each action's
// number: rank by rank, in program order, from 0.
Status validate_coverage(const Schedule& schedule, ActionIndex* numbered = nullptr);

// Calls `visit(dependency)` for each action that `action` waits for besides
// its predecessor in program order. `is_split(stage, microbatch, slice)`
// tells whether that backward runs as I + W (else as one B), so that mixed
// schedules resolve who sends a gradient. The single statement of the rules:
// the validator and the engine both derive their graphs from it.
// `stages_per_chain`: Schedule::stages_per_chain(); a chain's first stage
// takes the input and its last computes the loss.
// REQUIRES: action.stage in [0, num_stages), action.slice in [0, num_slices).
template <typename IsSplit, typename Visit>
void for_each_data_dependency(const Action& action, int stages_per_chain, int num_slices,
                              IsSplit is_split, Visit visit) {
  const int s = action.stage;
  const int mb = action.microbatch;
  const int j = action.slice;
  const auto gradient_of = [&](int stage, int slice) {
    return Action{is_split(stage, mb, slice) ? ActionKind::kBackwardInput : ActionKind::kBackward,
                  stage, mb, slice};
  };
  switch (action.kind) {
    case ActionKind::kForward:
      if (s % stages_per_chain > 0) visit(Action{ActionKind::kForward, s - 1, mb, j});
      if (j > 0) visit(Action{ActionKind::kForward, s, mb, j - 1});
      break;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      visit(Action{ActionKind::kForward, s, mb, j});
      if ((s + 1) % stages_per_chain > 0) visit(gradient_of(s + 1, j));
      if (j + 1 < num_slices) visit(gradient_of(s, j + 1));
      break;
    case ActionKind::kBackwardWeight:
      visit(Action{ActionKind::kBackwardInput, s, mb, j});
      break;
    case ActionKind::kStep:  // applies the gradient: after its weight part
      visit(is_split(s, mb, j) ? Action{ActionKind::kBackwardWeight, s, mb, j}
                               : Action{ActionKind::kBackward, s, mb, j});
      break;
  }
}

}  // namespace ppsim
