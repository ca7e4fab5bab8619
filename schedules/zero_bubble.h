// Zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR 2024): the backward of each (microbatch, stage) runs as I, the input
// gradient that the previous stage waits for, and W, the weight gradient that
// nobody waits for. Only F and I sit on the critical path between ranks, so W
// can be moved into the gaps that 1F1B leaves idle.
//
// Memory unit used below: a microbatch is "in flight" on a stage from the
// start of its F to the end of its W, which is how the engine holds its
// activation bytes (sim/engine.h). The paper counts W as holding less than a
// full activation; see make_zb_h1 for where that matters.
//
// Figures quoted below are for T_F = T_I = T_W = T per rank, free
// communication and one iteration alone; all were checked with the engine.
#pragma once

#include "schedules/generators.h"

namespace ppsim {

// ZB-H1 (paper Fig. 3, top), v == 1. Rank i runs 1F1B's min(p-1-i, m)
// warm-up forwards; then F, I pairs, adding a W to each pair only from the
// (i+1)-th on; then its last I's, each followed by a W; then the W's still
// owed. The I's return to rank 0 sooner than 1F1B's B's, and the i deferred
// W's fill the tail. At most min(p-i, m) microbatches between F and I on
// rank i (1F1B's bound), and min(p, m) between F and W on every rank: rank
// 0's peak is 1F1B's, rank i > 0 holds its i deferred W's on top. (No order
// keeps rank p-1 to one microbatch from F to W and still ends by
// (3m + p - 1)T: it would have to run F, I, W strictly in turn, so its last I
// ends at (3m + p - 2)T at best and rank 0's last W at (3m + 2p - 2)T.)
// Makespan (3m + p - 1)T for m >= p, (2m + 2p - 1)T for m < p: both are
// lower bounds for any one-stage-per-rank schedule, so no order does better.
Result<Schedule> make_zb_h1(const ScheduleParams& params);

// ZB-H2 (paper Fig. 3, bottom), v == 1. Rank i front-loads
// min(2(p-1-i) + 1, m) forwards, which fills the time until the first input
// gradient returns; then runs I, W, F rounds while rank 0 has forwards left;
// then its last I's, each followed by one of its 2i remaining forwards while
// any remain and by a W after that; then the W's still owed. Each rank's work
// is one block from iT to (3m + i)T when m >= 2p-1: a parallelogram. At most min(2p-1, m)
// microbatches in flight on every rank. One iteration takes the same
// (optimal) time as ZB-H1; but iterations laid back to back without an
// optimizer barrier (post-validation) add exactly 3mT each when m >= 2p-1:
// no bubble in steady state. With fewer microbatches rank 0 cannot fill the
// (2p-1)T until its first input gradient returns.
Result<Schedule> make_zb_h2(const ScheduleParams& params);

// ZB-V (the authors' handcrafted V schedule), v == 2: rank r owns stages r
// and 2p-1-r, so a microbatch goes down the ranks and comes back up, and rank
// 0 holds both the first and the last stage. Each stage is half a rank's
// layers: T/2 for each of F, I and W. Per rank: 2(p-r)-1 forwards of the
// down stage; r alternations of up and down forwards; p-r rounds of F, I, W
// of the up stage; then rounds of F, I, W of the down stage and F, I, W of
// the up stage; in the cool-down the input gradients still owed (r up, p
// down) with W's of the down stage in the gaps, then the remaining W's.
// With A the activation of one stage, at most 2*min(p, m)*A in flight on
// every rank (exactly 2pA when m >= 2p-1): 1F1B's peak on rank 0, where one
// stage is a whole rank's layers (2A) and min(p, m) microbatches are in
// flight. Makespan 3mT + (p-1)T/2 for m >= 2p-1 (optimal: rank p-1 starts at
// (p-1)T/2), against 1F1B's 3(m+p-1)T; back to back, 3mT per iteration. The
// order is built for max(m, 2p-1) microbatches and the surplus dropped
// (dropping actions cannot create a cycle), so any m >= 1 is accepted, with
// more bubble below 2p-1.
Result<Schedule> make_zb_v(const ScheduleParams& params);

}  // namespace ppsim
