#include "sim/engine/program_order_replay.h"

#include <algorithm>
#include <limits>

#include "schedules/validate.h"
#include "sim/engine/engine.h"

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

bool ProgramOrderReplay::index(const Schedule& s, const CostTable& costs) {
  const int ranks = s.num_ranks;
  index_.reset(s.num_stages, s.num_microbatches, s.num_slices);
  begin_.assign(1, 0);
  for (int rank = 0; rank < ranks; ++rank) {
    int32_t id = begin_.back();
    for (const Action& a : s.programs[rank]) {
      if (a.overlaps_next || a.kind == ActionKind::kStep) return false;
      index_[a] = id++;
    }
    begin_.push_back(id);
  }
  const size_t n = static_cast<size_t>(begin_.back());
  dep_begin_.assign(1, 0);
  deps_.clear();
  remote_.assign(n, -1);
  link_.resize(n);
  transfer_.resize(n);
  links_.assign(ranks, {});
  link_free_.clear();
  const auto is_split = [&](int stage, int mb, int slice) {
    return index_.contains({ActionKind::kBackwardInput, stage, mb, slice});
  };
  bool covered = true;
  for (int rank = 0; rank < ranks; ++rank) {
    for (const Action& a : s.programs[rank]) {
      const int32_t consumer = index_[a];
      for_each_data_dependency(
          a, s.stages_per_chain(), s.num_slices, is_split, [&](const Action& dep) {
            const int32_t producer = index_[dep];
            PPSIM_CHECK(producer >= 0);
            deps_.push_back(producer);
            const int from = s.stage_rank[dep.stage];
            if (from == rank) return;
            covered &= remote_[producer] < 0;  // one transfer per action
            remote_[producer] = consumer;
            link_[producer] = link_of(from, rank);
            // Across ranks data flows between stages at the same slice: the
            // smaller (stage, slice) index is the transfer's (boundary, slice).
            const int boundary = std::min(dep.stage, a.stage) * s.num_slices + a.slice;
            transfer_[producer] = dep.kind == ActionKind::kForward ? costs.p2p_forward[boundary]
                                                                   : costs.p2p_backward[boundary];
          });
      dep_begin_.push_back(static_cast<int32_t>(deps_.size()));
    }
  }
  return covered;
}

bool ProgramOrderReplay::run_programs(const Schedule& s, const CostTable& costs,
                                      const RunOptions& options, int iteration,
                                      Timeline* timeline) {
  const int ranks = s.num_ranks;
  const bool last = iteration + 1 == options.iterations;
  std::fill(end_.begin(), end_.end(), -1);
  int remaining = ranks;
  while (remaining > 0) {
    bool moved = false;
    for (int rank = 0; rank < ranks; ++rank) {
      RankState& r = ranks_[rank];
      if (r.done) continue;
      const Action* program = s.programs[rank].data();
      const int32_t length = begin_[rank + 1] - begin_[rank];
      for (; r.pos < length; ++r.pos) {
        const int32_t id = begin_[rank] + r.pos;
        Picos start = std::max(r.free_at, r.sends_end);
        bool ready = true;
        for (int32_t k = dep_begin_[id]; k < dep_begin_[id + 1]; ++k) {
          const int32_t dep = deps_[k];
          if (end_[dep] < 0) {
            ready = false;
            break;
          }
          start = std::max(start, remote_[dep] == id ? arrival_[dep] : end_[dep]);
        }
        if (!ready) break;
        const Action& a = program[r.pos];
        const StageCost& cost = costs.stages[a.stage * s.num_slices + a.slice];
        const Picos end = add_saturated(start, compute_time(cost, a.kind));
        if (last) timeline->busy_tally[rank] += static_cast<double>(end - start);
        int64_t& peak = timeline->peak_activation_bytes[rank];
        if (a.kind == ActionKind::kForward) {
          r.activation += cost.activation_bytes;
          peak = std::max(peak, r.activation);
        }
        const int64_t freed = freed_bytes(cost, a.kind);
        r.activation -= freed;
        if (freed < 0) peak = std::max(peak, r.activation);  // an I that leaves more than F took
        r.free_at = end_[id] = end;
        if (remote_[id] >= 0) {
          Picos& link_free = link_free_[link_[id]];
          arrival_[id] = link_free = add_saturated(std::max(end, link_free), transfer_[id]);
          if (options.blocking_sends) r.sends_end = std::max(r.sends_end, arrival_[id]);
        }
        moved = true;
      }
      if (r.pos < length) continue;
      // Its gradients, then the barrier (which its blocking sends do not hold).
      r.done = true;
      --remaining;
      moved = true;
      r.barrier = r.free_at;
      if (const Picos sync = costs.grad_sync[rank]; sync > 0) {
        const Picos start = std::max(r.free_at, r.sends_end);
        r.free_at = r.barrier = add_saturated(start, sync);
        timeline->epilogue.push_back(
            EpilogueRecord{EpilogueKind::kGradSync, rank, iteration, start, r.free_at});
      }
    }
    if (!moved) return false;
  }
  return true;
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
                                                    const CostTable& costs,
                                                    const RunOptions& options, Timeline* timeline) {
  if (!index(schedule, costs)) return Outcome::kNotCovered;
  const size_t n = static_cast<size_t>(begin_.back());
  end_.resize(n);
  arrival_.resize(n);
  ranks_.assign(schedule.num_ranks, RankState{});
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    if (!run_programs(schedule, costs, options, iteration, timeline)) return Outcome::kStalled;
    run_epilogue(costs, iteration, timeline);
  }
  timeline->makespan = timeline->iteration_end.back();
  return Outcome::kDone;
}

}  // namespace ppsim
