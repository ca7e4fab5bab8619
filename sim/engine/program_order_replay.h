// The engine's rules (engine.h) replayed without events, for the runs a
// summary reads: each rank runs its program in order as far as its next
// action's inputs are known, the ranks in turn, until every rank is done or
// a whole round moves none (a stall). No graph of out-edges and no heap: an
// action starts at the latest of its rank's last end, the arrival of its
// rank's blocking sends and its inputs' arrivals; a transfer takes its link
// when its producer ends, so each directed link serves its transfers in the
// sender's program order, as the event engine's does. At the end of each
// iteration every rank syncs its gradients, waits for the others, joins the
// pipeline-wide all-reduce and steps, as the event engine does.
//
// It covers a synchronous step without records (RunOptions::record false),
// transfers posted at once (no Schedule::comm_posts), no overlapped pairs,
// no optimizer step inside the programs, and at most one consumer on
// another rank per action; Engine::run hands everything else to the event
// engine. Where it runs, its timeline is the event engine's to the
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
  // *timeline prepared by Engine::run (sizes set, tallies zero). kStalled:
  // a deadlock (the timeline is then not to be read); kNotCovered: an
  // action the replay does not cover, or a schedule whose ranks wait on
  // each other so often that its rounds would visit ranks many times for
  // each action (kMaxVisitsPerAction): the timeline is then to be prepared
  // again for the event engine.
  Outcome run(const Schedule& schedule, const CostTable& costs, const RunOptions& options,
              Timeline* timeline);

 private:
  // Numbers the actions rank by rank in program order and lays out each
  // one's inputs and its transfer; false where an action is not covered.
  bool index(const Schedule& schedule, const CostTable& costs);
  int32_t link_of(int src, int dst);
  // Runs `rank`'s program on from its position as far as its inputs are
  // known; whether it ran any action.
  bool advance(const Schedule& schedule, const CostTable& costs, const RunOptions& options,
               bool last, int rank, Timeline* timeline);
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

  ActionIndex index_;
  std::vector<int32_t> begin_;      // per rank: its first action's id; one past the last rank's
  std::vector<int32_t> dep_begin_;  // per action: its first input in deps_; one past the last
  std::vector<int32_t> deps_;       // the ids of each action's inputs
  // Per action, what a consumer reads of it: 32 bytes, one cache line for
  // all that a dependency costs.
  struct Slot {
    Picos end = -1;       // this iteration; -1 before it ends
    Picos arrival = 0;    // at its remote consumer, this iteration
    Picos transfer = 0;   // its transfer's time, with a remote consumer
    int32_t remote = -1;  // its consumer on another rank, or -1
    int32_t link = 0;     // with a remote consumer: its link
  };
  static_assert(sizeof(Slot) == 32);
  std::vector<Slot> slots_;
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
