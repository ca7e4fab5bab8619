#include "sim/engine/program_order_replay.h"

#include <algorithm>

#include "schedules/validate.h"
#include "sim/engine/engine.h"
#include "sim/engine/huge_pages.h"

namespace ppsim {

bool ProgramOrderReplay::covers(const Schedule& schedule, const RunOptions& options) {
  return options.synchronous_step && !options.record && schedule.comm_posts.empty();
}

int32_t ProgramOrderReplay::link_of(int src, int dst) {
  for (const Link& link : links_[src]) {
    if (link.dst == dst) return link.id;
  }
  const auto id = static_cast<int32_t>(link_free_.size());
  links_[src].push_back(Link{dst, id});
  link_free_.push_back(0);
  return id;
}

void ProgramOrderReplay::index_routes(const Schedule& s, const CostTable& costs) {
  links_.resize(s.num_ranks);
  for (std::vector<Link>& links : links_) links.clear();  // keeping their memory
  link_free_.clear();
  routes_.assign(2 * costs.p2p_forward.size(), Route{});
  for (size_t k = 0; k < costs.p2p_forward.size(); ++k) {
    const int lower = s.stage_rank[k / s.num_slices];
    const int upper = s.stage_rank[k / s.num_slices + 1];
    if (lower == upper) continue;
    routes_[2 * k] = Route{link_of(lower, upper), costs.p2p_forward[k]};
    routes_[2 * k + 1] = Route{link_of(upper, lower), costs.p2p_backward[k]};
  }
}

void ProgramOrderReplay::index_action_costs(const CostTable& costs) {
  action_costs_.resize(costs.stages.size() * kNumActionKinds);
  for (size_t k = 0; k < costs.stages.size(); ++k) {
    const StageCost& cost = costs.stages[k];
    for (int kind = 0; kind < kNumActionKinds; ++kind) {
      const auto action = static_cast<ActionKind>(kind);
      action_costs_[k * kNumActionKinds + kind] = ActionCost{
          compute_time(cost, action), action == ActionKind::kForward ? cost.activation_bytes : 0,
          freed_bytes(cost, action)};
    }
  }
}

bool ProgramOrderReplay::index(const Schedule& s, const ActionIndex& numbered,
                               const CostTable& costs) {
  const int ranks = s.num_ranks;
  begin_.assign(1, 0);
  for (int rank = 0; rank < ranks; ++rank) {
    begin_.push_back(begin_.back() + static_cast<int32_t>(s.programs[rank].size()));
  }
  const size_t n = static_cast<size_t>(begin_.back());
  slots_.clear();
  slots_.reserve(n);
  advise_huge_pages(slots_);
  slots_.resize(n);
  index_routes(s, costs);
  index_action_costs(costs);
  const auto is_split = [&](int stage, int mb, int slice) {
    return numbered.contains({ActionKind::kBackwardInput, stage, mb, slice});
  };
  bool covered = true;
  const int stages_per_chain = s.stages_per_chain();
  int32_t id = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    for (const Action& a : s.programs[rank]) {
      if (a.overlaps_next || a.kind == ActionKind::kStep) return false;
      for_each_data_dependency(a, stages_per_chain, s.num_slices, is_split, [&](const Action& dep) {
        const int32_t producer = numbered[dep];
        PPSIM_CHECK(producer >= 0);
        // An input on the same rank ran earlier in the program, and ended
        // before the rank's last action did; one later in the program is a
        // deadlock, which the event engine reports.
        if (s.stage_rank[dep.stage] == rank) {
          covered &= producer < id;
          return;
        }
        Slot& out = slots_[producer];
        Slot& in = slots_[id];
        covered &= out.route < 0 && in.input < 0;  // one transfer per action, one input
        // Across ranks data flows between stages at the same slice: the
        // smaller (stage, slice) index is the transfer's (boundary, slice).
        const int boundary = std::min(dep.stage, a.stage) * s.num_slices + a.slice;
        out.route = 2 * boundary + (dep.kind == ActionKind::kForward ? 0 : 1);
        PPSIM_CHECK(routes_[out.route].link >= 0);  // the boundary's stages are on two ranks
        in.input = producer;
      });
      ++id;
    }
  }
  return covered;
}

// Inlined into run_programs: it runs once per visit of a rank, about one
// per two actions, and the call with its copies of the rank's state was 4 %
// of a whole process's instructions (docs/benchmarks.md).
[[gnu::always_inline]] inline bool ProgramOrderReplay::advance(const Schedule& s,
                                                               const RunOptions& options, bool last,
                                                               int rank, Timeline* timeline) {
  // Locals, not members: stores to the slots cannot alias them, so they stay
  // in registers. The busy time is summed in program order as the event
  // engine sums it, to the bit.
  RankState r = ranks_[rank];
  double busy = timeline->busy_tally[rank];
  int64_t peak = timeline->peak_activation_bytes[rank];
  const int32_t first = begin_[rank];
  const int32_t length = begin_[rank + 1] - first;
  const Action* program = s.programs[rank].data();
  const int32_t from = r.pos;
  for (; r.pos < length; ++r.pos) {
    const int32_t id = first + r.pos;
    Slot& slot = slots_[id];
    Picos start = std::max(r.free_at, r.sends_end);
    if (slot.input >= 0) {
      const Picos arrival = slots_[slot.input].arrival;
      if (arrival < 0) break;
      start = std::max(start, arrival);
    }
    const Action& a = program[r.pos];
    const ActionCost& cost = action_costs_[(a.stage * s.num_slices + a.slice) * kNumActionKinds +
                                           static_cast<int>(a.kind)];
    const Picos end = add_saturated(start, cost.time);
    if (last) busy += static_cast<double>(end - start);
    // The activation never exceeds the peak, so only a growth can raise it:
    // an F's, or an I that leaves more than its F took.
    r.activation += cost.grows;
    peak = std::max(peak, r.activation);
    r.activation -= cost.frees;
    peak = std::max(peak, r.activation);
    r.free_at = end;
    if (slot.route >= 0) {
      const Route& route = routes_[slot.route];
      Picos& link_free = link_free_[route.link];
      slot.arrival = link_free = add_saturated(std::max(end, link_free), route.transfer);
      if (options.blocking_sends) r.sends_end = std::max(r.sends_end, slot.arrival);
    }
  }
  ranks_[rank] = r;
  timeline->busy_tally[rank] = busy;
  timeline->peak_activation_bytes[rank] = peak;
  return r.pos > from;
}

void ProgramOrderReplay::sync_gradients(const CostTable& costs, int iteration, int rank,
                                        Timeline* timeline) {
  RankState& r = ranks_[rank];
  r.done = true;
  r.barrier = r.free_at;  // the barrier, unlike the sync, does not wait for blocking sends
  if (const Picos sync = costs.grad_sync[rank]; sync > 0) {
    const Picos start = std::max(r.free_at, r.sends_end);
    r.free_at = r.barrier = add_saturated(start, sync);
    timeline->epilogue.push_back(
        EpilogueRecord{EpilogueKind::kGradSync, rank, iteration, start, r.free_at});
  }
}

ProgramOrderReplay::Outcome ProgramOrderReplay::run_programs(const Schedule& s,
                                                             const CostTable& costs,
                                                             const RunOptions& options,
                                                             int iteration, Timeline* timeline) {
  const int ranks = s.num_ranks;
  const bool last = iteration + 1 == options.iterations;
  for (Slot& slot : slots_) slot.arrival = -1;
  int remaining = ranks;
  int64_t visits_left = int64_t{kMaxVisitsPerAction} * begin_.back() + 2 * ranks;
  // Rounds sweep up and down in turn: activations flow up the ranks and
  // gradients down, so each sweep carries one of them as far as it goes.
  for (bool up = true; remaining > 0; up = !up) {
    bool moved = false;
    if ((visits_left -= ranks) < 0) return Outcome::kNotCovered;
    for (int i = 0; i < ranks; ++i) {
      const int rank = up ? i : ranks - 1 - i;
      if (ranks_[rank].done) continue;
      moved |= advance(s, options, last, rank, timeline);
      if (ranks_[rank].pos < begin_[rank + 1] - begin_[rank]) continue;
      sync_gradients(costs, iteration, rank, timeline);
      --remaining;
      moved = true;
    }
    if (!moved) return Outcome::kStalled;
  }
  return Outcome::kDone;
}

void ProgramOrderReplay::run_epilogue(const CostTable& costs, int iteration, Timeline* timeline) {
  Picos barrier = 0;
  for (const RankState& r : ranks_) barrier = std::max(barrier, r.barrier);
  const Picos synced = add_saturated(barrier, costs.pipeline_sync);
  const auto ranks = static_cast<int>(ranks_.size());
  if (costs.pipeline_sync > 0) {
    for (int rank = 0; rank < ranks; ++rank) {
      timeline->epilogue.push_back(
          EpilogueRecord{EpilogueKind::kPipelineSync, rank, iteration, barrier, synced});
    }
  }
  Picos& iteration_end = timeline->iteration_end[iteration];
  for (int rank = 0; rank < ranks; ++rank) {
    RankState& r = ranks_[rank];
    r.free_at = synced;
    if (const Picos step = costs.optimizer_step[rank]; step > 0) {
      const Picos start = std::max(synced, r.sends_end);
      r.free_at = add_saturated(start, step);
      timeline->epilogue.push_back(
          EpilogueRecord{EpilogueKind::kOptimizerStep, rank, iteration, start, r.free_at});
    }
    iteration_end = std::max(iteration_end, r.free_at);
    r.pos = 0;
    r.done = false;
  }
}

ProgramOrderReplay::Outcome ProgramOrderReplay::run(const Schedule& schedule,
                                                    const ActionIndex& numbered,
                                                    const CostTable& costs,
                                                    const RunOptions& options, Timeline* timeline) {
  if (!index(schedule, numbered, costs)) return Outcome::kNotCovered;
  ranks_.assign(schedule.num_ranks, RankState{});
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    if (const Outcome o = run_programs(schedule, costs, options, iteration, timeline);
        o != Outcome::kDone) {
      return o;
    }
    run_epilogue(costs, iteration, timeline);
  }
  timeline->makespan = timeline->iteration_end.back();
  return Outcome::kDone;
}

}  // namespace ppsim
