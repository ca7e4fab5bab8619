// A Timeline is what happened in one run of a schedule, simulated or
// measured: for every action its rank, start and end; every transfer on a
// link; and, derived from those, every change of activation memory. Action records are laid out
// in the schedule's program order (rank 0's program, then rank 1's, ...), so
// two timelines of one schedule join on the record index.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/action.h"
#include "sim/core/time.h"

namespace ppsim {

struct ActionRecord {
  Action action;
  int32_t rank = 0;
  int32_t iteration = 0;
  Picos start = 0;
  Picos end = 0;
};

// End-of-iteration work on a rank, after its program: data-parallel gradient
// reduction, the all-reduce across pipeline ranks of a synchronous step, and
// the optimizer step.
enum class EpilogueKind : uint8_t { kGradSync, kPipelineSync, kOptimizerStep };
const char* to_string(EpilogueKind kind);

struct EpilogueRecord {
  EpilogueKind kind = EpilogueKind::kGradSync;
  int32_t rank = 0;
  int32_t iteration = 0;
  Picos start = 0;
  Picos end = 0;
};

// The output of `producer` (an activation after F, a gradient after B or I)
// travelling from its rank to the rank of `consumer`. It is ready when the
// producer ends and may wait on the link until `start` while earlier
// transfers go first.
struct TransferRecord {
  int32_t producer = 0;  // index into Timeline::actions
  int32_t consumer = 0;  // index into Timeline::actions
  Picos start = 0;
  Picos end = 0;
};

// Activation memory of `rank` changes by `delta_bytes` at `time`.
struct MemoryEvent {
  Picos time = 0;
  int32_t rank = 0;
  int64_t delta_bytes = 0;
};

struct Timeline {
  int num_ranks = 0;
  int iterations = 1;
  // Iteration-major, then the schedule's program order: iteration k's
  // records are [k n, (k + 1) n) for n = Schedule::num_actions().
  std::vector<ActionRecord> actions;
  std::vector<EpilogueRecord> epilogue;
  std::vector<TransferRecord> transfers;  // per link in order of start
  std::vector<int64_t> static_bytes;      // per rank, held throughout
  std::vector<int64_t> working_bytes;     // per rank (CostTable::working_bytes)
  // Per (stage, slice), at stage * num_slices + slice: the activation bytes
  // one microbatch takes when its F starts and gives back when its B ends;
  // with a split backward, I leaves `weight_grad` held (more than
  // `activation` where I allocates more than it frees) and W gives that
  // back. The memory events follow from the action records (memory_events
  // below).
  int num_slices = 1;
  struct StageMemory {
    int64_t activation = 0;
    int64_t weight_grad = 0;
  };
  std::vector<StageMemory> stage_memory;
  std::vector<int64_t> p2p_bytes;  // per (boundary, slice), bytes of one transfer
  Picos makespan = 0;              // end of the last activity
  // Per iteration, when its last rank finished it (its optimizer step ended).
  std::vector<Picos> iteration_end;

  // Per rank, the highest activation memory reached.
  std::vector<int64_t> peak_activation_bytes;
  // Per rank, the compute time of the last iteration, in picoseconds, where
  // the engine kept no action records (RunOptions::record); else empty.
  std::vector<double> busy_tally;

  // The time between the ends of the last two iterations: the steady state
  // when the iterations have settled. With one iteration, the makespan.
  Picos period() const;
  // Per rank, the F/B/I/W compute time of one iteration of the last run, the
  // run period() is measured on (an asynchronous stream's run holds several
  // batches: its busy time over them). A simulated run's iterations all do
  // the same work; a measured run's first is slower, and only the last
  // run's busy time is comparable with period(). A run without records:
  // busy_tally.
  std::vector<double> busy_per_iteration() const;

  int src_rank(const TransferRecord& x) const { return actions[x.producer].rank; }
  int dst_rank(const TransferRecord& x) const { return actions[x.consumer].rank; }
  // When the producer hands its output on: its end, or its overlapped
  // pair's end.
  Picos ready(const TransferRecord& x) const { return actions[pair_end(x.producer)].end; }
  // The record of the other action of record k's overlapped pair
  // (Action::overlaps_next), or -1 when k is not in one.
  int64_t overlap_partner(size_t k) const {
    if (actions[k].action.overlaps_next) return static_cast<int64_t>(k) + 1;
    if (k > 0 && actions[k - 1].action.overlaps_next) return static_cast<int64_t>(k) - 1;
    return -1;
  }
  int64_t bytes(const TransferRecord& x) const;

 private:
  // Record k, or its pair's backward: the record that ends when k's output leaves.
  size_t pair_end(size_t k) const { return actions[k].action.overlaps_next ? k + 1 : k; }
};

// The activation memory events of a timeline: F's allocation at its start,
// and the net change of B, I and W at their end (an I's may be positive).
// Sorted by time; at equal times by rank, and a rank's in program order.
std::vector<MemoryEvent> memory_events(const Timeline& timeline);

}  // namespace ppsim
