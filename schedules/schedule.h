// A Schedule is the plan of one training iteration: one program (an ordered
// list of Actions) per pipeline rank, plus which rank owns each stage.
// Generators build it; the simulator and the real runtimes execute it
// unchanged, so predicted and measured timelines name the same actions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/action.h"

namespace ppsim {

// Where a compute+comms file (PyTorch's `format="compute_comms"`) posts the
// transfers of one action: `send_after`, the number of its rank's actions
// done when the SEND of its output to another rank is posted (at least its
// own position + 1); `recv_after`, the number done when the RECV of its input
// from another rank is posted (at most its own position). -1: a send posted
// as the action ends, a receive posted before the iteration starts, as every
// generated schedule has them. A transfer starts once both are posted (and
// its link is free).
struct CommPosts {
  int32_t send_after = -1;
  int32_t recv_after = -1;

  friend bool operator==(const CommPosts&, const CommPosts&) = default;
};

struct Schedule {
  std::string name;  // the generator's kind, e.g. "1f1b"
  int num_ranks = 0;
  int num_stages = 0;
  int num_microbatches = 0;
  int num_slices = 1;  // token slices per microbatch (TeraPipe); 1 otherwise
  // The stages form `num_chains` equal runs of consecutive ids, and the
  // microbatches as many equal runs: microbatch run c enters at the first
  // stage of chain c and computes its loss at that chain's last. One chain
  // in every schedule but DualPipe's two (one entering at each end of the
  // ranks); the chains hold the same layers.
  int num_chains = 1;
  std::vector<int> stage_rank;                // stage -> owning rank
  std::vector<std::vector<Action>> programs;  // rank -> program, in execution order
  // Empty, or the shape of `programs`: each action's posted transfers.
  std::vector<std::vector<CommPosts>> comm_posts;

  // True when backward is split into I and W actions (zero-bubble families).
  bool split_backward() const;
  size_t num_actions() const;
  int stages_per_chain() const { return num_stages / num_chains; }
  int chain_of_stage(int stage) const { return stage / stages_per_chain(); }
  int chain_of_microbatch(int microbatch) const {
    return microbatch / (num_microbatches / num_chains);
  }
};

// `pass` run `passes` times over on every rank, pass k's microbatches
// numbered after pass k - 1's: one iteration of several pipeline flushes
// (gradient accumulation as PyTorch's pipelining runs it, a step() per
// pass). Each pass waits for the previous one only through each rank's
// program order, as the runtimes run them.
// REQUIRES: one chain; no posted transfers (generated schedules have none).
Schedule repeat_passes(const Schedule& pass, int passes);

// Text form of one rank's program: "0F0 0F1 0B0 ...", an overlapped pair
// as "(0F7;7B3)" (Action::overlaps_next).
std::string program_to_string(const std::vector<Action>& program);

}  // namespace ppsim
