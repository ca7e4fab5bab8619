#include "sim/engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "schedules/validate.h"
#include "sim/engine/huge_pages.h"

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

// Links are the directed pairs of ranks that data flows between: usually a
// rank's two neighbours, so the scan is short.
int32_t Engine::link_id(int src, int dst) const {
  for (int32_t link = link_begin_[src]; link < link_begin_[src + 1]; ++link) {
    if (link_dst_[link] == dst) return link;
  }
  PPSIM_CHECK(false);  // build() made one for every edge between ranks
  return -1;
}

void Engine::add_link(int src, int dst) {
  std::vector<int16_t>& dsts = dsts_of_[src];
  if (std::find(dsts.begin(), dsts.end(), dst) == dsts.end()) {
    dsts.push_back(static_cast<int16_t>(dst));
  }
}

void Engine::index_links() {
  link_begin_.assign(1, 0);
  link_dst_.clear();
  for (int src = 0; src < num_ranks_; ++src) {
    link_dst_.insert(link_dst_.end(), dsts_of_[src].begin(), dsts_of_[src].end());
    link_begin_.push_back(static_cast<int32_t>(link_dst_.size()));
  }
  link_free_.assign(link_dst_.size(), 0);
}

void Engine::index_durations(const Schedule& s, const CostTable& costs) {
  durations_.resize(costs.stages.size() * kNumActionKinds);
  comms_.assign(costs.stages.size() * kNumActionKinds, 0);
  for (int stage = 0; stage < s.num_stages; ++stage) {
    const int rank = s.stage_rank[stage];
    // The rank's reduction and update, shared by its stages (S actions
    // exist only where every rank has a stage).
    const Picos step = (costs.grad_sync[rank] + costs.optimizer_step[rank]) /
                       std::max(1, s.num_stages / num_ranks_);
    for (int slice = 0; slice < s.num_slices; ++slice) {
      const StageCost& c = costs.stages[stage * s.num_slices + slice];
      Picos* d = &durations_[(stage * s.num_slices + slice) * kNumActionKinds];
      for (const ActionKind kind : {ActionKind::kForward, ActionKind::kBackward,
                                    ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
        d[static_cast<int>(kind)] = compute_time(c, kind);
      }
      d[static_cast<int>(ActionKind::kStep)] = step;
      Picos* comm = &comms_[(stage * s.num_slices + slice) * kNumActionKinds];
      comm[static_cast<int>(ActionKind::kForward)] = c.forward_comm;
      comm[static_cast<int>(ActionKind::kBackward)] = c.backward_comm - c.backward_overlap;
      comm[static_cast<int>(ActionKind::kBackwardInput)] = c.backward_comm;
    }
  }
}

void Engine::build(const Schedule& s, const CostTable& costs) {
  PPSIM_CHECK(costs.num_slices == s.num_slices);
  PPSIM_CHECK(costs.num_stages() == s.num_stages);
  const size_t transfers = static_cast<size_t>(s.num_stages - 1) * s.num_slices;
  PPSIM_CHECK(costs.p2p_forward.size() == transfers);
  PPSIM_CHECK(costs.p2p_backward.size() == transfers);
  PPSIM_CHECK(static_cast<int>(costs.grad_sync.size()) == s.num_ranks);
  PPSIM_CHECK(static_cast<int>(costs.optimizer_step.size()) == s.num_ranks);
  PPSIM_CHECK(s.num_ranks <= std::numeric_limits<int16_t>::max());
  num_ranks_ = s.num_ranks;
  costs_ = &costs;
  const size_t n = s.num_actions();
  nodes_per_iteration_ = static_cast<int32_t>(n);
  // With a synchronous step every rank leaves the barrier with its
  // iteration done, so the next one reuses the same nodes.
  node_copies_ = options_.synchronous_step ? 1 : options_.iterations;
  nodes_.clear();
  nodes_.reserve(n * node_copies_);
  advise_huge_pages(nodes_);
  node_of_.resize(n);
  record_of_.resize(n);
  ranks_.assign(num_ranks_, RankState{});
  dsts_of_.resize(num_ranks_);
  for (std::vector<int16_t>& dsts : dsts_of_) dsts.clear();
  heap_.clear();
  seq_ = 0;
  barrier_arrived_ = 0;
  steps_in_program_ = false;
  index_durations(s, costs);

  index_.reset(s.num_stages, s.num_microbatches, s.num_slices);
  int32_t record = 0;
  size_t longest = 0;
  for (int rank = 0; rank < num_ranks_; ++rank) {
    ranks_[rank].program = s.programs[rank].data();
    ranks_[rank].begin = record;
    ranks_[rank].length = static_cast<int32_t>(s.programs[rank].size());
    record += ranks_[rank].length;
    longest = std::max(longest, s.programs[rank].size());
  }
  int32_t node = 0;
  for (size_t pos = 0; pos < longest; ++pos) {
    for (int rank = 0; rank < num_ranks_; ++rank) {
      if (pos >= s.programs[rank].size()) continue;
      const Action& a = s.programs[rank][pos];
      Node& nd = nodes_.emplace_back();
      nd.stage_slice = a.stage * s.num_slices + a.slice;
      nd.rank = static_cast<int16_t>(rank);
      nd.kind = a.kind;
      steps_in_program_ |= a.kind == ActionKind::kStep;
      const int32_t rec = ranks_[rank].begin + static_cast<int32_t>(pos);
      node_of_[rec] = node;
      record_of_[node] = rec;
      index_[a] = node++;
    }
  }

  // Invert the dependency rules into out-edges.
  const auto is_split = [&](int stage, int mb, int slice) {
    return index_.contains({ActionKind::kBackwardInput, stage, mb, slice});
  };
  for (int rank = 0; rank < num_ranks_; ++rank) {
    for (const Action& a : s.programs[rank]) {
      const int32_t consumer = index_[a];
      for_each_data_dependency(a, s.stages_per_chain(), s.num_slices, is_split,
                               [&](const Action& dep) {
                                 const int32_t producer = index_[dep];
                                 PPSIM_CHECK(producer >= 0);
                                 Node& p = nodes_[producer];
                                 int k = 0;
                                 while (k < 3 && p.out[k] >= 0) ++k;
                                 PPSIM_CHECK(k < 3);
                                 p.out[k] = consumer;
                                 ++nodes_[consumer].pending;
                                 if (p.rank != rank) add_link(p.rank, rank);
                               });
    }
  }
  index_links();
  posts_.clear();
  for (const std::vector<CommPosts>& posts : s.comm_posts) {
    posts_.insert(posts_.end(), posts.begin(), posts.end());
  }
  deferred_.clear();
  waiting_.resize(num_ranks_);
  for (std::vector<Waiting>& waiting : waiting_) waiting.clear();
  initial_pending_.resize(n);
  for (size_t i = 0; i < n; ++i) initial_pending_[i] = nodes_[i].pending;
  // Later copies: the same graph, shifted.
  for (int k = 1; k < node_copies_; ++k) {
    const int32_t shift = k * nodes_per_iteration_;
    for (int32_t i = 0; i < nodes_per_iteration_; ++i) {
      Node& copy = nodes_.emplace_back(nodes_[i]);
      for (int32_t& target : copy.out) {
        if (target >= 0) target += shift;
      }
    }
  }
}

void Engine::reset_nodes() {
  deferred_.clear();  // every transfer of the iteration has started by its barrier
  for (int32_t i = 0; i < nodes_per_iteration_; ++i) {
    nodes_[i].time = 0;
    nodes_[i].pending = initial_pending_[i];
  }
}

void Engine::push(Picos time, int32_t rank) {
  heap_.push_back(Event{time, seq_++, rank});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

void Engine::start_epilogue(int32_t rank, EpilogueKind kind, Picos now, Picos duration) {
  RankState& r = ranks_[rank];
  r.busy = true;
  const Picos start = std::max(now, r.sends_end);
  const Picos end = add_saturated(start, duration);
  out_->epilogue.push_back(EpilogueRecord{kind, rank, r.iteration, start, end});
  push(end, rank);
}

void Engine::try_start(int32_t rank, Picos now) {
  RankState& r = ranks_[rank];
  while (!r.busy) {
    switch (r.phase) {
      case Phase::kProgram: {
        if (r.pos == r.length) {
          r.phase = Phase::kGradSync;
          break;
        }
        const int32_t record = r.begin + r.pos;
        const int32_t iteration_base = r.iteration * nodes_per_iteration_;
        const Node& nd = nodes_[node_base(r.iteration) + node_of_[record]];
        if (nd.pending > 0) return;
        if (r.program[r.pos].overlaps_next) {
          start_pair(rank, now);
          return;
        }
        const Picos start = std::max({now, nd.time, r.sends_end});
        const Picos end = add_saturated(start, duration_of(nd));
        if (options_.record) {
          out_->actions[iteration_base + record] =
              ActionRecord{r.program[r.pos], rank, r.iteration, start, end};
        } else if (r.iteration + 1 == options_.iterations) {
          out_->busy_tally[rank] += static_cast<double>(end - start);
        }
        r.busy = true;
        if (nd.kind == ActionKind::kForward) {
          r.activation += costs_->stages[nd.stage_slice].activation_bytes;
          out_->peak_activation_bytes[rank] =
              std::max(out_->peak_activation_bytes[rank], r.activation);
        }
        push(end, rank);
        return;
      }
      case Phase::kGradSync:
        if (costs_->grad_sync[rank] > 0 && !steps_in_program_) {
          start_epilogue(rank, EpilogueKind::kGradSync, now, costs_->grad_sync[rank]);
          return;
        }
        r.phase = options_.synchronous_step ? Phase::kBarrier : Phase::kStep;
        break;
      case Phase::kBarrier:
        // Wait for every rank; the last to arrive releases them all into the
        // pipeline-wide all-reduce, which they run together.
        r.busy = true;
        if (++barrier_arrived_ == num_ranks_) {
          barrier_arrived_ = 0;
          if (r.iteration + 1 < options_.iterations) reset_nodes();
          const Picos end = add_saturated(now, costs_->pipeline_sync);
          for (int32_t other = 0; other < num_ranks_; ++other) {
            ranks_[other].phase = Phase::kPipelineSync;
            if (costs_->pipeline_sync > 0) {
              out_->epilogue.push_back(EpilogueRecord{EpilogueKind::kPipelineSync, other,
                                                      ranks_[other].iteration, now, end});
            }
            push(end, other);
          }
        }
        return;
      case Phase::kPipelineSync:  // only reached through finish()
        return;
      case Phase::kStep:
        if (costs_->optimizer_step[rank] > 0 && !steps_in_program_) {
          start_epilogue(rank, EpilogueKind::kOptimizerStep, now, costs_->optimizer_step[rank]);
          return;
        }
        finish(rank, now);  // a step that takes no time ends the iteration at once
        return;
      case Phase::kDone:
        return;
    }
  }
}

// The pair at the rank's position: both actions' inputs in, it runs for
// overlapped_pair_time. Its records split that time between the two in
// proportion to their own times, so that busy time counts it once.
void Engine::start_pair(int32_t rank, Picos now) {
  RankState& r = ranks_[rank];
  const int32_t record = r.begin + r.pos;
  const Node& forward = nodes_[node_base(r.iteration) + node_of_[record]];
  const Node& backward = nodes_[node_base(r.iteration) + node_of_[record + 1]];
  if (backward.pending > 0) return;
  const Picos start = std::max({now, forward.time, backward.time, r.sends_end});
  const Picos f = duration_of(forward);
  const Picos b = duration_of(backward);
  const Picos pair =
      overlapped_pair_time(f, comm_of(forward), b, comm_of(backward), costs_->comm_sm_fraction);
  const Picos end = add_saturated(start, pair);
  if (options_.record) {
    const Picos split =
        start + static_cast<Picos>(static_cast<double>(pair) * static_cast<double>(f) /
                                   std::max(1.0, static_cast<double>(f + b)));
    ActionRecord* out = &out_->actions[r.iteration * nodes_per_iteration_ + record];
    out[0] = ActionRecord{r.program[r.pos], rank, r.iteration, start, split};
    out[1] = ActionRecord{r.program[r.pos + 1], rank, r.iteration, split, end};
  } else if (r.iteration + 1 == options_.iterations) {
    out_->busy_tally[rank] += static_cast<double>(end - start);
  }
  r.busy = true;
  r.activation += costs_->stages[forward.stage_slice].activation_bytes;
  out_->peak_activation_bytes[rank] = std::max(out_->peak_activation_bytes[rank], r.activation);
  push(end, rank);
}

void Engine::finish_actions(int32_t rank, Picos now) {
  RankState& r = ranks_[rank];
  const int32_t first = r.begin + r.pos;
  const int32_t count = r.program[r.pos].overlaps_next ? 2 : 1;
  r.pos += count;
  const int32_t copy_base = node_base(r.iteration);
  uint32_t waits[2] = {0, 0};
  for (int32_t k = 0; k < count; ++k)
    waits[k] = deliver(rank, copy_base + node_of_[first + k], first + k, now);
  // Only now, with every arrival known (and with blocking sends, the
  // rank's own sends_end): may start this rank's next action, pos having
  // moved past these.
  for (int32_t k = 0; k < count; ++k) {
    const int32_t* out = nodes_[copy_base + node_of_[first + k]].out;
    for (int e = 0; e < 3 && out[e] >= 0; ++e) {
      if ((waits[k] >> e & 1) != 0) continue;  // woken when its transfer starts
      Node& consumer = nodes_[out[e]];
      if (--consumer.pending == 0) try_start(consumer.rank, now);
    }
  }
  if (!posts_.empty()) post(rank, now);
}

// A rank has reached a post of `iteration` when it has done that many
// actions of it, or gone on to a later one: a receiver still in an earlier
// iteration (its optimizer step after the barrier, or behind without one)
// has not.
bool Engine::reached(int32_t rank, int32_t after, int32_t iteration) const {
  const RankState& r = ranks_[rank];
  return after < 0 || r.iteration > iteration || (r.iteration == iteration && r.pos >= after);
}

bool Engine::posted(int32_t sender, int32_t program_record, int32_t target,
                    int32_t iteration) const {
  const int32_t consumer_record = record_of_[target - node_base(iteration)];
  return reached(sender, posts_[program_record].send_after, iteration) &&
         reached(nodes_[target].rank, posts_[consumer_record].recv_after, iteration);
}

void Engine::defer(int32_t rank, int32_t node, int32_t program_record, int32_t target) {
  const auto id = static_cast<int32_t>(deferred_.size());
  const int32_t iteration = ranks_[rank].iteration;
  deferred_.push_back(Deferred{rank, node, program_record, target, iteration});
  const int32_t send_after = posts_[program_record].send_after;
  if (!reached(rank, send_after, iteration)) waiting_[rank].push_back(Waiting{send_after, id});
  const int32_t receiver = nodes_[target].rank;
  const int32_t recv_after = posts_[record_of_[target - node_base(iteration)]].recv_after;
  if (!reached(receiver, recv_after, iteration)) {
    waiting_[receiver].push_back(Waiting{recv_after, id});
  }
}

void Engine::post(int32_t rank, Picos now) {
  std::vector<Waiting>& waiting = waiting_[rank];
  for (size_t i = 0; i < waiting.size();) {
    const Deferred d = deferred_[waiting[i].deferred];
    if (!reached(rank, waiting[i].after, d.iteration)) {
      ++i;
      continue;
    }
    waiting[i] = waiting.back();
    waiting.pop_back();
    // The other side may still be waiting: then its post starts it.
    if (!posted(d.rank, d.program_record, d.target, d.iteration)) continue;
    send(d.rank, d.node, d.program_record, d.target, now, d.iteration);
    Node& consumer = nodes_[d.target];
    if (--consumer.pending == 0) try_start(consumer.rank, now);
  }
}

uint32_t Engine::deliver(int32_t rank, int32_t node, int32_t program_record, Picos now) {
  RankState& r = ranks_[rank];
  const Node& nd = nodes_[node];
  const int64_t freed = freed_bytes(costs_->stages[nd.stage_slice], nd.kind);
  r.activation -= freed;
  if (freed < 0) {  // an I that leaves more than its F took
    out_->peak_activation_bytes[rank] = std::max(out_->peak_activation_bytes[rank], r.activation);
  }
  uint32_t waits = 0;
  for (int e = 0; e < 3 && nd.out[e] >= 0; ++e) {
    const int32_t target = nd.out[e];
    Node& consumer = nodes_[target];
    if (consumer.rank == rank) {
      consumer.time = std::max(consumer.time, now);
    } else if (posts_.empty() || posted(rank, program_record, target, r.iteration)) {
      send(rank, node, program_record, target, now, r.iteration);
    } else {
      defer(rank, node, program_record, target);
      waits |= 1u << e;
    }
  }
  return waits;
}

// Across ranks only the stage-to-stage edges travel: F(s) -> F(s+1) carries
// an activation, B/I(s+1) -> B/I(s) a gradient.
void Engine::send(int32_t rank, int32_t node, int32_t program_record, int32_t target, Picos now,
                  int32_t iteration) {
  RankState& r = ranks_[rank];
  const Node& nd = nodes_[node];
  Node& consumer = nodes_[target];
  const int boundary = std::min(nd.stage_slice, consumer.stage_slice);
  const Picos cost = nd.kind == ActionKind::kForward ? costs_->p2p_forward[boundary]
                                                     : costs_->p2p_backward[boundary];
  Picos& link_free = link_free_[link_id(rank, consumer.rank)];
  const Picos start = std::max(now, link_free);
  const Picos arrival = link_free = add_saturated(start, cost);
  if (options_.record) {
    const int32_t iteration_base = iteration * nodes_per_iteration_;
    out_->transfers.push_back(
        TransferRecord{iteration_base + program_record,
                       iteration_base + record_of_[target - node_base(iteration)], start, arrival});
  }
  consumer.time = std::max(consumer.time, arrival);
  if (options_.blocking_sends) r.sends_end = std::max(r.sends_end, arrival);
}

void Engine::finish(int32_t rank, Picos now) {
  RankState& r = ranks_[rank];
  r.busy = false;
  switch (r.phase) {
    case Phase::kProgram:
      finish_actions(rank, now);
      break;
    case Phase::kGradSync:
      r.phase = options_.synchronous_step ? Phase::kBarrier : Phase::kStep;
      break;
    case Phase::kPipelineSync:
      r.phase = Phase::kStep;
      break;
    case Phase::kStep: {
      Picos& end = out_->iteration_end[r.iteration];
      end = std::max(end, now);
      r.pos = 0;
      r.phase = ++r.iteration == options_.iterations ? Phase::kDone : Phase::kProgram;
      if (!posts_.empty() && r.phase == Phase::kProgram) post(rank, now);  // its first receives
      break;
    }
    case Phase::kBarrier:
    case Phase::kDone:
      PPSIM_CHECK(false);  // no event ends these
  }
  try_start(rank, now);
}

namespace {

// Sizes *timeline for a run, keeping its capacity, with every tally zero.
void prepare_timeline(const Schedule& schedule, const CostTable& costs, const RunOptions& options,
                      Timeline* timeline) {
  Timeline& t = *timeline;
  const int ranks = schedule.num_ranks;
  t.num_ranks = ranks;
  t.iterations = options.iterations;
  t.iteration_end.assign(options.iterations, 0);
  t.epilogue.clear();
  t.epilogue.reserve(3 * static_cast<size_t>(ranks) * options.iterations);
  t.transfers.clear();
  t.busy_tally.clear();
  if (options.record) {
    const size_t records = schedule.num_actions() * options.iterations;
    t.transfers.reserve(records);
    advise_huge_pages(t.transfers);
    t.actions.reserve(records);
    advise_huge_pages(t.actions);
    t.actions.resize(records);  // each record is written when its action starts
  } else {
    t.actions.clear();
    t.busy_tally.assign(ranks, 0.0);
  }
  t.static_bytes = costs.static_bytes;
  t.static_bytes.resize(ranks, 0);
  t.working_bytes = costs.working_bytes;
  t.working_bytes.resize(ranks, 0);
  t.num_slices = costs.num_slices;
  t.stage_memory.resize(costs.stages.size());
  for (size_t s = 0; s < costs.stages.size(); ++s) {
    t.stage_memory[s] =
        Timeline::StageMemory{costs.stages[s].activation_bytes, costs.stages[s].weight_grad_bytes};
  }
  t.p2p_bytes = costs.p2p_bytes;
  t.peak_activation_bytes.assign(ranks, 0);
}

// A stall is a deadlock: the search for its cycle runs only then. Every
// time is a saturating sum: one that reached kMaxPicos would have wrapped,
// and the run's end is the latest of them all.
Status conclude(const Schedule& schedule, bool stalled, const Timeline& t) {
  if (stalled) {
    const Status cycle = validate(schedule);
    PPSIM_CHECK(!cycle.ok());  // a schedule without a cycle always runs to the end
    return cycle;
  }
  if (t.makespan == kMaxPicos) {
    return Error{fmt::format(
        "the simulated run ({} iterations) is longer than 2^63 ps (106 days), the longest ppsim "
        "replays: the costs are too large for this many microbatches",
        t.iterations)};
  }
  return {};
}

}  // namespace

Status Engine::run(const Schedule& schedule, const CostTable& costs, Timeline* timeline,
                   const RunOptions& options) {
  PPSIM_CHECK(options.iterations >= 1);
  if (!schedule.comm_posts.empty() && options.blocking_sends) {
    return Error{
        "a schedule that posts its transfers (a compute+comms file) runs with non-blocking sends "
        "only (a send posted after later actions cannot hold its sender from the start): set "
        "training.blocking_p2p: false"};
  }
  PPSIM_CHECK(schedule.num_actions() * options.iterations <
              static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  if (Status st = validate_coverage(schedule, &numbered_); !st) return st;
  prepare_timeline(schedule, costs, options, timeline);
  if (ProgramOrderReplay::covers(schedule, options)) {
    const ProgramOrderReplay::Outcome outcome =
        program_order_.run(schedule, numbered_, costs, options, timeline);
    if (outcome != ProgramOrderReplay::Outcome::kNotCovered) {
      return conclude(schedule, outcome == ProgramOrderReplay::Outcome::kStalled, *timeline);
    }
    prepare_timeline(schedule, costs, options, timeline);  // what it left, undone
  }
  options_ = options;
  build(schedule, costs);
  out_ = timeline;
  for (int rank = 0; rank < num_ranks_; ++rank) try_start(rank, 0);
  Picos now = 0;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Event ev = heap_.back();
    heap_.pop_back();
    now = ev.time;
    finish(ev.rank, now);
  }
  out_ = nullptr;
  timeline->makespan = now;
  const bool stalled = std::any_of(ranks_.begin(), ranks_.end(),
                                   [](const RankState& r) { return r.phase != Phase::kDone; });
  return conclude(schedule, stalled, *timeline);
}

}  // namespace ppsim
