#include "sim/engine.h"

#include <algorithm>

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

const char* to_string(EpilogueKind kind) {
  return kind == EpilogueKind::kGradSync ? "grad-sync" : "optimizer-step";
}

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
  PPSIM_CHECK(s.num_ranks <= 16383);  // links fit in int16_t
  num_ranks_ = s.num_ranks;
  costs_ = &costs;
  nodes_.assign(s.num_actions(), Node{});
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
  node_of_.resize(record);
  int32_t node = 0;
  for (size_t pos = 0; pos < longest; ++pos) {
    for (int rank = 0; rank < num_ranks_; ++rank) {
      if (pos >= s.programs[rank].size()) continue;
      const Action& a = s.programs[rank][pos];
      Node& nd = nodes_[node];
      const StageCost& c = costs.stages[a.stage];
      nd.rank = rank;
      nd.record = ranks_[rank].begin + static_cast<int32_t>(pos);
      switch (a.kind) {
        case ActionKind::kForward:
          nd.duration = c.forward;
          nd.memory_bytes = c.activation_bytes;
          nd.takes_memory = true;
          break;
        case ActionKind::kBackward:
          nd.duration = c.backward;
          nd.memory_bytes = c.activation_bytes;
          break;
        case ActionKind::kBackwardInput:
          nd.duration = c.backward - c.weight_grad;
          break;
        case ActionKind::kBackwardWeight:
          nd.duration = c.weight_grad;
          nd.memory_bytes = c.activation_bytes;
          break;
      }
      node_of_[nd.record] = node;
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
        PPSIM_CHECK(p.num_out < 2);
        const int k = p.num_out++;
        p.out[k] = consumer;
        ++nodes_[consumer].pending;
        if (p.rank == rank) return;
        // Across ranks only the stage-to-stage edges travel: F(s) -> F(s+1)
        // carries an activation, B/I(s+1) -> B/I(s) a gradient.
        p.link[k] = static_cast<int16_t>(link_id(p.rank, rank));
        p.boundary = std::min(dep.stage, a.stage);
        p.transfer_time = dep.kind == ActionKind::kForward ? costs.p2p_forward[p.boundary]
                                                           : costs.p2p_backward[p.boundary];
      });
    }
  }
}

void Engine::change_memory(int32_t rank, Picos at, int64_t delta) {
  RankState& r = ranks_[rank];
  r.activation += delta;
  out_->memory.push_back(MemoryEvent{at, rank, delta});
  out_->peak_activation_bytes[rank] = std::max(out_->peak_activation_bytes[rank], r.activation);
}

void Engine::try_start(int32_t rank, Picos now) {
  RankState& r = ranks_[rank];
  while (!r.busy) {
    if (r.pc < r.end) {
      Node& nd = nodes_[node_of_[r.pc]];
      if (nd.pending > 0) return;
      nd.time = std::max(now, nd.time);
      r.busy = true;
      // Its successor's node is the one its neighbours hand inputs to next:
      // fetch it while this action runs.
      if (r.pc + 1 < r.end) __builtin_prefetch(&nodes_[node_of_[r.pc + 1]], 1);
      if (nd.takes_memory) change_memory(rank, nd.time, nd.memory_bytes);
      heap_.push_back(Event{nd.time + nd.duration, seq_++, rank});
      std::push_heap(heap_.begin(), heap_.end(), Later{});
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
    heap_.push_back(Event{now + duration, seq_++, rank});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
}

void Engine::finish(int32_t rank, Picos now) {
  RankState& r = ranks_[rank];
  r.busy = false;
  const int32_t record = r.pc++;
  if (record < r.end) {
    const Node& nd = nodes_[node_of_[record]];
    out_->busy[rank] += nd.duration;
    if (!nd.takes_memory && nd.memory_bytes != 0) change_memory(rank, now, -nd.memory_bytes);
    for (int k = 0; k < nd.num_out; ++k) {
      Node& consumer = nodes_[nd.out[k]];
      Picos arrival = now;
      if (nd.link[k] >= 0) {
        Picos& link_free = link_free_[nd.link[k]];
        const Picos start = std::max(now, link_free);
        arrival = link_free = start + nd.transfer_time;
        out_->transfers.push_back(TransferRecord{
            record, consumer.record, rank, consumer.rank,
            costs_->p2p_bytes.empty() ? 0 : costs_->p2p_bytes[nd.boundary], now, start, arrival});
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
  t.actions.resize(nodes_.size());
  for (int rank = 0; rank < num_ranks_; ++rank) {
    const auto& program = schedule.programs[rank];
    for (size_t k = 0; k < program.size(); ++k) {
      t.actions[ranks_[rank].begin + k] = ActionRecord{program[k], rank, 0, 0};
    }
  }
  t.epilogue.clear();
  t.epilogue.reserve(2 * static_cast<size_t>(num_ranks_));
  t.transfers.clear();
  t.transfers.reserve(nodes_.size());
  t.memory.clear();
  t.memory.reserve(2 * nodes_.size());
  t.static_bytes = costs.static_bytes;
  t.static_bytes.resize(num_ranks_, 0);
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
  for (size_t k = 0; k < t.actions.size(); ++k) {
    const Node& nd = nodes_[node_of_[k]];
    t.actions[k].start = nd.time;
    t.actions[k].end = nd.time + nd.duration;
  }
  // A validated schedule cannot stall; if one did, its numbers would be wrong.
  for (const RankState& r : ranks_) PPSIM_CHECK(r.pc == r.end + 2);
  out_ = nullptr;
}

}  // namespace ppsim
