// The discrete-event engine: replays a Schedule's per-rank programs on
// modelled devices and links and records a Timeline.
//
// Each rank has one compute resource that runs its program in order; an
// action starts when its predecessor has ended and its data dependencies
// (schedules/validate.h) have arrived. An output bound for another rank
// travels on the directed link between the two ranks, one transfer at a time
// in the order they became ready, overlapping with compute. After its program
// a rank runs its gradient synchronisation and optimizer step.
//
// Events (an action or epilogue phase ending) are ordered by (time in
// picoseconds, sequence number), so a run is deterministic. Transfers need no
// events of their own: every transfer on a directed link comes from the one
// rank at its source, in that rank's program order, so the link serves them
// first come, first served as they are handed over, and each one's start and
// arrival are known then. Likewise a rank whose next action has all its
// inputs on the way is committed to starting it when the last one lands. An Engine keeps its
// buffers between runs, so the explorer reuses one per thread; engines share nothing and may run
// side by side.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/schedule.h"
#include "sim/costs.h"
#include "sim/timeline.h"

namespace ppsim {

class Engine {
 public:
  // REQUIRES: validate(schedule).ok(); costs sized for schedule's stages and ranks.
  // Overwrites *timeline, reusing its capacity.
  void run(const Schedule& schedule, const CostTable& costs, Timeline* timeline);

 private:
  // The run-time state of one action: 32 bytes, so that the actions in
  // flight stay in cache. Nodes are laid out position-major (every rank's
  // first action, then every rank's second, ...): ranks advance roughly
  // together, so the actions in flight are close to each other in memory.
  struct Node {
    Picos time = 0;  // before it starts: latest arrival of its inputs; then its start
    Picos duration = 0;
    int32_t out[2] = {-1, -1};  // consumers
    int32_t stage = 0;
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
  struct RankState {
    int32_t begin = 0;  // first record of the program in Timeline::actions
    int32_t end = 0;
    int32_t pc = 0;  // next record; end, end + 1 are the epilogue phases
    bool busy = false;
    int64_t activation = 0;
  };

  void build(const Schedule& schedule, const CostTable& costs);
  int link_id(int src, int dst) const;
  void try_start(int32_t rank, Picos now);
  void finish(int32_t rank, Picos now);
  void push(Picos time, int32_t rank);

  int num_ranks_ = 0;
  const CostTable* costs_ = nullptr;
  Timeline* out_ = nullptr;
  std::vector<Node> nodes_;
  std::vector<RankState> ranks_;
  std::vector<Picos> link_free_;  // per directed link: when its last transfer ends
  std::vector<Event> heap_;
  std::vector<int32_t> node_of_;    // record -> node
  std::vector<int32_t> record_of_;  // node -> record
  std::vector<int32_t> index_;      // (kind, stage, microbatch) -> node
  uint64_t seq_ = 0;
};

}  // namespace ppsim
