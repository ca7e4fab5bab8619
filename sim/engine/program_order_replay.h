// The engine's rules (engine.h) replayed without events, for the runs a
// summary reads: each rank runs its program in order as far as its next
// action's inputs are known, the ranks in turn, until every rank is done or
// a whole round moves none (a stall). No graph of out-edges and no heap: an
// action starts at the latest of its rank's last end, the arrival of its
// rank's blocking sends and that of its input from another rank (an input on
// its own rank ran earlier in the program, or the schedule deadlocks: it is
// left to the event engine); a transfer takes its link when its producer
// ends, so each directed link serves its transfers in the sender's program
// order, as the event engine's does. At the end of each
// iteration every rank syncs its gradients, waits for the others, joins the
// pipeline-wide all-reduce and steps, as the event engine does.
//
// It covers a synchronous step without records (RunOptions::record false),
// transfers posted at once (no Schedule::comm_posts), no overlapped pairs,
// no optimizer step inside the programs, at most one consumer on another
// rank per action and at most one input from another rank (as every
// schedule of stages in a line has); Engine::run hands everything else to
// the event engine. Where it runs, its timeline is the event engine's to the
// picosecond but for the order of its epilogue records
// (tests/unit/invariants_test.cc, ARunWithoutRecordsKeepsWhatTheSummaryReads,
// holds it to that on every schedule kind).
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/action_index.h"
#include "schedules/schedule.h"
#include "sim/core/costs.h"
#include "sim/core/timeline.h"

namespace ppsim {

struct RunOptions;

class ProgramOrderReplay {
 public:
  // The checks on the run as a whole; run() makes the per-action ones.
  static bool covers(const Schedule& schedule, const RunOptions& options);

  enum class Outcome { kDone, kStalled, kNotCovered };
  // REQUIRES: covers(schedule, options), and what Engine::run requires;
  // `numbered` filled by validate_coverage(schedule, &numbered); *timeline
  // prepared by Engine::run (sizes set, tallies zero). kStalled:
  // a deadlock (the timeline is then not to be read); kNotCovered: an
  // action the replay does not cover, or a schedule whose ranks wait on
  // each other so often that its rounds would visit ranks many times for
  // each action (kMaxVisitsPerAction): the timeline is then to be prepared
  // again for the event engine.
  Outcome run(const Schedule& schedule, const ActionIndex& numbered, const CostTable& costs,
              const RunOptions& options, Timeline* timeline);

 private:
  // Lays out each action's input from another rank and its route to its
  // consumer on another rank; false where an action is not covered.
  bool index(const Schedule& schedule, const ActionIndex& numbered, const CostTable& costs);
  int32_t link_of(int src, int dst);
  // The routes of every boundary between stages, each way.
  void index_routes(const Schedule& schedule, const CostTable& costs);
  // What each kind of action costs on each (stage, slice).
  void index_action_costs(const CostTable& costs);
  // Runs `rank`'s program on from its position as far as its inputs are
  // known; whether it ran any action.
  bool advance(const Schedule& schedule, const RunOptions& options, bool last, int rank,
               Timeline* timeline);
  // The rank's program is done: its gradient sync, and when it reaches the
  // barrier.
  void sync_gradients(const CostTable& costs, int iteration, int rank, Timeline* timeline);
  // Generated schedules need half a visit of a rank per action or less
  // (1F1B: m + p rounds of p ranks for 2 m p actions); a custom order
  // could need one round per action.
  static constexpr int kMaxVisitsPerAction = 8;
  // Runs each rank's program as far as it can, in rounds.
  Outcome run_programs(const Schedule& schedule, const CostTable& costs, const RunOptions& options,
                       int iteration, Timeline* timeline);
  // The end of the iteration once every rank has reached the barrier: the
  // pipeline-wide all-reduce, then each rank's optimizer step.
  void run_epilogue(const CostTable& costs, int iteration, Timeline* timeline);

  std::vector<int32_t> begin_;  // per rank: its first action's id; one past the last rank's
  // Per action (numbered as validate_coverage numbers them), what running it
  // reads and writes besides its cost: 16 bytes, four to a cache line.
  struct Slot {
    Picos arrival = -1;  // at its consumer on another rank, this iteration; -1 before
    int32_t route = -1;  // its way to its consumer on another rank, or -1
    int32_t input = -1;  // its input from another rank, or -1
  };
  static_assert(sizeof(Slot) == 16);
  std::vector<Slot> slots_;
  // A transfer over one boundary between stages at one slice, one way:
  // route 2 k + 0 is boundary k's forward (its activation up), 2 k + 1 its
  // backward (the gradient down), k = (lower stage) * slices + slice.
  struct Route {
    int32_t link = -1;  // -1 where both stages are on one rank
    Picos transfer = 0;
  };
  std::vector<Route> routes_;
  // An action's time and what it does to its rank's activation memory: it
  // holds `grows` more bytes when it ends, then gives `frees` back (an I
  // that leaves more than its F took frees a negative count). Entry
  // (stage * slices + slice) * kNumActionKinds + kind.
  struct ActionCost {
    Picos time = 0;
    int64_t grows = 0;
    int64_t frees = 0;
  };
  std::vector<ActionCost> action_costs_;
  struct Link {
    int32_t dst;
    int32_t id;
  };
  std::vector<std::vector<Link>> links_;  // per rank: the links it sends on
  std::vector<Picos> link_free_;          // per link: when its last transfer arrives
  struct RankState {
    int32_t pos = 0;    // next action of the program
    bool done = false;  // program and gradient sync done
    Picos free_at = 0;  // end of its last action or epilogue phase
    Picos sends_end = 0;
    Picos barrier = 0;  // when it reached the barrier
    int64_t activation = 0;
  };
  std::vector<RankState> ranks_;
};

}  // namespace ppsim
