#include "sim/engine.h"

#include <algorithm>
#include <limits>

#include "schedules/validate.h"

namespace ppsim {
namespace {

// Min-heap order on (time, seq): std::push_heap keeps the largest on top.
struct Later {
  template <typename E>
  bool operator()(const E& a, const E& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

}  // namespace

// Links are directed pairs of neighbouring ranks (the interleaved layout
// wraps from rank p-1 to rank 0): two per source rank, next and previous.
int Engine::link_id(int src, int dst) const {
  return dst == (src + 1) % num_ranks_ ? 2 * src : 2 * src + 1;
}

void Engine::build(const Schedule& s, const CostTable& costs) {
  PPSIM_CHECK(costs.num_stages() == s.num_stages);
  PPSIM_CHECK(static_cast<int>(costs.p2p_forward.size()) == s.num_stages - 1);
  PPSIM_CHECK(static_cast<int>(costs.p2p_backward.size()) == s.num_stages - 1);
  PPSIM_CHECK(static_cast<int>(costs.grad_sync.size()) == s.num_ranks);
  PPSIM_CHECK(static_cast<int>(costs.optimizer_step.size()) == s.num_ranks);
  PPSIM_CHECK(s.num_ranks <= std::numeric_limits<int16_t>::max());
  num_ranks_ = s.num_ranks;
  costs_ = &costs;
  const size_t n = s.num_actions();
  nodes_.assign(n, Node{});
  node_of_.resize(n);
  record_of_.resize(n);
  ranks_.assign(num_ranks_, RankState{});
  link_free_.assign(2 * static_cast<size_t>(num_ranks_), 0);
  heap_.clear();
  seq_ = 0;

  const size_t per_kind = static_cast<size_t>(s.num_stages) * s.num_microbatches;
  index_.assign(kNumActionKinds * per_kind, -1);
  const auto slot = [&](const Action& a) -> int32_t& {
    return index_[static_cast<size_t>(a.kind) * per_kind +
                  static_cast<size_t>(a.stage) * s.num_microbatches + a.microbatch];
  };
  int32_t record = 0;
  size_t longest = 0;
  for (int rank = 0; rank < num_ranks_; ++rank) {
    ranks_[rank].begin = ranks_[rank].pc = record;
    record += static_cast<int32_t>(s.programs[rank].size());
    ranks_[rank].end = record;
    longest = std::max(longest, s.programs[rank].size());
  }
  int32_t node = 0;
  for (size_t pos = 0; pos < longest; ++pos) {
    for (int rank = 0; rank < num_ranks_; ++rank) {
      if (pos >= s.programs[rank].size()) continue;
      const Action& a = s.programs[rank][pos];
      const StageCost& c = costs.stages[a.stage];
      Node& nd = nodes_[node];
      nd.rank = static_cast<int16_t>(rank);
      nd.stage = a.stage;
      nd.kind = a.kind;
      switch (a.kind) {
        case ActionKind::kForward:
          nd.duration = c.forward;
          break;
        case ActionKind::kBackward:
          nd.duration = c.backward;
          break;
        case ActionKind::kBackwardInput:
          nd.duration = c.backward - c.weight_grad;
          break;
        case ActionKind::kBackwardWeight:
          nd.duration = c.weight_grad;
          break;
      }
      const int32_t rec = ranks_[rank].begin + static_cast<int32_t>(pos);
      node_of_[rec] = node;
      record_of_[node] = rec;
      slot(a) = node++;
    }
  }

  // Invert the dependency rules into out-edges.
  const auto is_split = [&](int stage, int mb) {
    return slot({ActionKind::kBackwardInput, stage, mb}) >= 0;
  };
  for (int rank = 0; rank < num_ranks_; ++rank) {
    for (const Action& a : s.programs[rank]) {
      const int32_t consumer = slot(a);
      for_each_data_dependency(a, s.num_stages, is_split, [&](const Action& dep) {
        const int32_t producer = slot(dep);
        PPSIM_CHECK(producer >= 0);
        Node& p = nodes_[producer];
        const int k = p.out[0] < 0 ? 0 : 1;
        PPSIM_CHECK(p.out[k] < 0);
        p.out[k] = consumer;
        ++nodes_[consumer].pending;
      });
    }
  }
}

void Engine::push(Picos time, int32_t rank) {
  heap_.push_back(Event{time, seq_++, rank});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

void Engine::try_start(int32_t rank, Picos now) {
  RankState& r = ranks_[rank];
  while (!r.busy) {
    if (r.pc < r.end) {
      Node& nd = nodes_[node_of_[r.pc]];
      if (nd.pending > 0) return;
      nd.time = std::max(now, nd.time);
      r.busy = true;
      if (nd.kind == ActionKind::kForward) {
        r.activation += costs_->stages[nd.stage].activation_bytes;
        out_->peak_activation_bytes[rank] =
            std::max(out_->peak_activation_bytes[rank], r.activation);
      }
      push(nd.time + nd.duration, rank);
      return;
    }
    const int phase = r.pc - r.end;
    if (phase >= 2) return;
    const Picos duration = phase == 0 ? costs_->grad_sync[rank] : costs_->optimizer_step[rank];
    if (duration == 0) {  // nothing to do in this phase: skip it
      ++r.pc;
      continue;
    }
    r.busy = true;
    out_->epilogue.push_back(
        EpilogueRecord{phase == 0 ? EpilogueKind::kGradSync : EpilogueKind::kOptimizerStep, rank,
                       now, now + duration});
    push(now + duration, rank);
  }
}

void Engine::finish(int32_t rank, Picos now) {
  RankState& r = ranks_[rank];
  r.busy = false;
  const int32_t record = r.pc++;
  if (record < r.end) {
    const Node& nd = nodes_[node_of_[record]];
    out_->busy[rank] += nd.duration;
    if (nd.kind == ActionKind::kBackward || nd.kind == ActionKind::kBackwardWeight) {
      r.activation -= costs_->stages[nd.stage].activation_bytes;
    }
    for (const int32_t target : nd.out) {
      if (target < 0) break;
      Node& consumer = nodes_[target];
      Picos arrival = now;
      if (consumer.rank != rank) {
        // Across ranks only the stage-to-stage edges travel: F(s) -> F(s+1)
        // carries an activation, B/I(s+1) -> B/I(s) a gradient.
        const int boundary = std::min(nd.stage, consumer.stage);
        const Picos cost = nd.kind == ActionKind::kForward ? costs_->p2p_forward[boundary]
                                                           : costs_->p2p_backward[boundary];
        Picos& link_free = link_free_[link_id(rank, consumer.rank)];
        const Picos start = std::max(now, link_free);
        arrival = link_free = start + cost;
        out_->transfers.push_back(TransferRecord{record, record_of_[target], start, arrival});
      }
      consumer.time = std::max(consumer.time, arrival);
      // May start this rank's next action: pc has moved past `record`.
      if (--consumer.pending == 0) try_start(consumer.rank, now);
    }
  }
  try_start(rank, now);
}

void Engine::run(const Schedule& schedule, const CostTable& costs, Timeline* timeline) {
  build(schedule, costs);
  out_ = timeline;
  Timeline& t = *timeline;
  t.num_ranks = num_ranks_;
  t.epilogue.clear();
  t.epilogue.reserve(2 * static_cast<size_t>(num_ranks_));
  t.transfers.clear();
  t.transfers.reserve(nodes_.size());
  t.static_bytes = costs.static_bytes;
  t.static_bytes.resize(num_ranks_, 0);
  t.stage_activation_bytes.resize(costs.stages.size());
  for (size_t s = 0; s < costs.stages.size(); ++s) {
    t.stage_activation_bytes[s] = costs.stages[s].activation_bytes;
  }
  t.p2p_bytes = costs.p2p_bytes;
  t.busy.assign(num_ranks_, 0);
  t.peak_activation_bytes.assign(num_ranks_, 0);

  for (int rank = 0; rank < num_ranks_; ++rank) try_start(rank, 0);
  Picos now = 0;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Event ev = heap_.back();
    heap_.pop_back();
    now = ev.time;
    finish(ev.rank, now);
  }
  t.makespan = now;
  // A validated schedule cannot stall; if one did, its numbers would be wrong.
  for (const RankState& r : ranks_) PPSIM_CHECK(r.pc == r.end + 2);

  t.actions.resize(nodes_.size());
  for (int rank = 0; rank < num_ranks_; ++rank) {
    const auto& program = schedule.programs[rank];
    for (size_t k = 0; k < program.size(); ++k) {
      const int32_t rec = ranks_[rank].begin + static_cast<int32_t>(k);
      const Node& nd = nodes_[node_of_[rec]];
      t.actions[rec] = ActionRecord{program[k], rank, nd.time, nd.time + nd.duration};
    }
  }
  out_ = nullptr;
}

}  // namespace ppsim
