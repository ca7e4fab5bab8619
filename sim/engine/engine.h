// The discrete-event engine: replays a Schedule's per-rank programs on
// modelled devices and links and records a Timeline.
//
// Each rank has one compute resource that runs its program in order; an
// action starts when its predecessor has ended and its data dependencies
// (schedules/validate.h) have arrived; an overlapped pair (a forward and the
// backward after it, Action::overlaps_next) starts when both may, runs for
// overlapped_pair_time and hands both outputs on at its end. An output bound for another rank
// travels on the directed link between the two ranks, one transfer at a time
// in the order they became ready, overlapping with compute (or, with
// RunOptions::blocking_sends, holding its sender until it arrives). After
// its program a rank synchronises its gradients (data parallelism) and steps
// its optimizer, then starts the next iteration. With a synchronous step, every
// rank first waits for all others and they all-reduce across the pipeline
// (gradient clipping and NaN checks need the global norm); with
// post-validation (Qi et al. 2024) a rank steps as soon as it is done.
//
// Events (an action or epilogue phase ending) are ordered by (time in
// picoseconds, sequence number), so a run is deterministic. Transfers need no
// events of their own: every transfer on a directed link comes from the one
// rank at its source, in that rank's program order, so the link serves them
// first come, first served as they are handed over, and each one's start and
// arrival are known then. Likewise a rank whose next action has all its
// inputs on the way is committed to starting it when the last one lands.
//
// A run that keeps no records with a synchronous step is replayed without
// events where it can be (program_order_replay.h: the same timeline, about
// five times faster); the rest runs on the events.
//
// An Engine keeps its buffers between runs, so the explorer reuses one per
// thread; engines share nothing and may run side by side.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/action_index.h"
#include "schedules/schedule.h"
#include "sim/core/costs.h"
#include "sim/core/timeline.h"
#include "sim/engine/program_order_replay.h"

namespace ppsim {

struct RunOptions {
  int iterations = 1;            // consecutive iterations of the schedule
  bool synchronous_step = true;  // false: post-validation, no barrier
  // true: a rank's sends block it, as Megatron-LM's synchronous send/recv
  // and DeepSpeed's pipeline engine do: its next action, or its
  // end-of-iteration work, starts only once every transfer of the action
  // before has arrived. false: transfers overlap the sender's compute.
  bool blocking_sends = false;
  // false: no action or transfer records, only what a summary reads (the
  // iteration ends, each rank's peak activation and its busy time in the
  // last iteration, Timeline::busy_tally); about 64 bytes less per replayed
  // action.
  bool record = true;
};

class Engine {
 public:
  // REQUIRES: costs sized for schedule's stages and ranks and within their
  // bounds (check_costs); options.iterations >= 1. Overwrites *timeline,
  // reusing its capacity. Errors (the timeline is then not to be read): what
  // validate_coverage finds (an action outside the schedule's shape, on the
  // wrong rank, missing or twice), a deadlock, as validate() words it, and
  // a run longer than kMaxPicos.
  Status run(const Schedule& schedule, const CostTable& costs, Timeline* timeline,
             const RunOptions& options = {});

 private:
  // The run-time state of one action until it starts (its record is written
  // then): 32 bytes, so that the actions in flight stay in cache. Nodes are
  // laid out position-major (every rank's first action, then every rank's
  // second, ...): ranks advance roughly together, so the actions in flight
  // are close to each other in memory. Iteration k's nodes are
  // [c n, (c + 1) n) for copy c = k % node_copies_.
  struct Node {
    Picos time = 0;                 // latest arrival of its inputs
    int32_t out[3] = {-1, -1, -1};  // consumers
    // Index of its (stage, slice) in the CostTable: stage * num_slices + slice.
    // Across ranks data flows only between stages at the same slice, so the
    // smaller of two such indices is the transfer's (boundary, slice) index.
    int32_t stage_slice = 0;
    int16_t rank = 0;
    int8_t pending = 0;  // data dependencies not yet delivered
    ActionKind kind = ActionKind::kForward;
  };
  static_assert(sizeof(Node) == 32);
  struct Event {
    Picos time;
    uint64_t seq;
    int32_t rank;
  };
  // What a rank is doing: its program, then the end-of-iteration phases.
  enum class Phase : uint8_t { kProgram, kGradSync, kBarrier, kPipelineSync, kStep, kDone };
  struct RankState {
    const Action* program = nullptr;
    int32_t begin = 0;  // first record of the program in an iteration's records
    int32_t length = 0;
    int32_t pos = 0;  // next action of the program
    int32_t iteration = 0;
    Phase phase = Phase::kProgram;
    bool busy = false;
    int64_t activation = 0;
    Picos sends_end = 0;  // when its last transfer arrives (blocking_sends)
  };

  void build(const Schedule& schedule, const CostTable& costs);
  // Back to before iteration 0, for the next iteration of a synchronous step.
  void reset_nodes();
  int32_t node_base(int32_t iteration) const {
    return iteration % node_copies_ * nodes_per_iteration_;
  }
  void index_durations(const Schedule& schedule, const CostTable& costs);
  Picos duration_of(const Node& node) const {
    return durations_[node.stage_slice * kNumActionKinds + static_cast<int>(node.kind)];
  }
  Picos comm_of(const Node& node) const {
    return comms_[node.stage_slice * kNumActionKinds + static_cast<int>(node.kind)];
  }
  // The directed links are numbered by source rank, then in the order their
  // first transfer appears in build().
  void add_link(int src, int dst);
  void index_links();
  int32_t link_id(int src, int dst) const;
  void try_start(int32_t rank, Picos now);
  void start_pair(int32_t rank, Picos now);
  void finish(int32_t rank, Picos now);
  // The action at the rank's position, or its overlapped pair, has ended:
  // deliver each one's outputs, then wake their consumers.
  void finish_actions(int32_t rank, Picos now);
  // Frees what the action gives back and sends its outputs on their links;
  // returns a bit per out-edge whose transfer waits for a later post
  // (Schedule::comm_posts), whose consumer is not to be woken yet.
  // `program_record`: its record in an iteration's records.
  uint32_t deliver(int32_t rank, int32_t node, int32_t program_record, Picos now);
  // The output of `node` (on `rank`, record `program_record`) to `target`
  // on another rank, handed to its link at `now`; of `iteration`.
  void send(int32_t rank, int32_t node, int32_t program_record, int32_t target, Picos now,
            int32_t iteration);
  // Whether `rank` has done `after` actions of `iteration` or gone past it
  // (after < 0: at once).
  bool reached(int32_t rank, int32_t after, int32_t iteration) const;
  // Whether an out-edge's transfer of `iteration` is posted on both sides by now.
  bool posted(int32_t sender, int32_t program_record, int32_t target, int32_t iteration) const;
  // Records a transfer that waits for a post, on the ranks it waits for.
  void defer(int32_t rank, int32_t node, int32_t program_record, int32_t target);
  // The rank has done r.pos actions of its iteration: the transfers waiting
  // for that post and now posted on both sides start.
  void post(int32_t rank, Picos now);
  void start_epilogue(int32_t rank, EpilogueKind kind, Picos now, Picos duration);
  void push(Picos time, int32_t rank);

  int num_ranks_ = 0;
  int32_t nodes_per_iteration_ = 0;
  int32_t node_copies_ = 1;  // copies of the graph: one per iteration that may overlap
  RunOptions options_;
  const CostTable* costs_ = nullptr;
  Timeline* out_ = nullptr;
  std::vector<Node> nodes_;
  std::vector<int8_t> initial_pending_;  // per node of one copy
  std::vector<Picos> durations_;         // per (stage, slice), then kind: one action's
  std::vector<Picos> comms_;             // likewise: the communication an overlapped pair hides
  std::vector<RankState> ranks_;
  std::vector<std::vector<int16_t>> dsts_of_;  // per rank: the ranks it sends to
  std::vector<int32_t> link_begin_;            // per rank: its first link; one past the last rank's
  std::vector<int16_t> link_dst_;              // per link: its destination
  std::vector<Picos> link_free_;               // per link: when its last transfer ends
  std::vector<Event> heap_;
  std::vector<int32_t> node_of_;    // record -> node, in iteration 0
  std::vector<int32_t> record_of_;  // node -> record, in iteration 0
  ActionIndex index_;               // action -> node, in iteration 0
  // Schedule::comm_posts per record of iteration 0 (empty: every transfer
  // posted at once), and the transfers waiting for a post.
  std::vector<CommPosts> posts_;
  struct Deferred {
    int32_t rank;            // the sender
    int32_t node;            // the producer
    int32_t program_record;  // the producer's
    int32_t target;          // the consumer's node
    int32_t iteration;       // the producer's
  };
  std::vector<Deferred> deferred_;
  struct Waiting {
    int32_t after;     // actions the rank must have done
    int32_t deferred;  // index into deferred_
  };
  std::vector<std::vector<Waiting>> waiting_;  // per rank
  int barrier_arrived_ = 0;
  // The schedule steps inside its programs (S actions): no end-of-iteration
  // gradient sync and step then.
  bool steps_in_program_ = false;
  uint64_t seq_ = 0;
  ActionIndex numbered_;              // action -> its number, rank by rank (validate_coverage's)
  ProgramOrderReplay program_order_;  // the runs it covers; its buffers kept too
};

}  // namespace ppsim
