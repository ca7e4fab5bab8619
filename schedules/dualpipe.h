// DualPipe's schedules (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024,
// section 3.2.1; github.com/deepseek-ai/DualPipe): the forward of one
// microbatch and the backward of another are paired so that one's
// communication hides under the other's compute: an overlapped pair
// (Action::overlaps_next), which the engine times by overlapped_pair_time
// (sim/core/costs.h).
#pragma once

#include "schedules/generators.h"

namespace ppsim {

// DualPipeV, the "cut-in-half" DualPipe, in the order PyTorch's
// ScheduleDualPipeV builds (torch.distributed.pipelining): 2p stages in a V,
// rank r holding stages r and 2p-1-r, microbatches entering at rank 0.
// Rank r runs, with d = stage r (down) and u = stage 2p-1-r (up):
//  1. 2(p-1-r) forwards of d;
//  2. r+1 rounds of a forward of d and one of u;
//  3. p-1-r rounds of u's input gradient, the oldest weight gradient owed,
//     and a forward of u;
//  4. m-2p+r+1 rounds of the pairs (F d; B u) and (F u; B d), full
//     backwards (the last rank's first round runs F d and B u unpaired);
//  5. p-1-r rounds of a backward of u and the pair (F u; B d);
//  6. r+1 rounds of a backward of u and one of d, full in the first half
//     and split into I (its W deferred) from the middle round on (for odd
//     ranks from u's, for even ranks from d's);
//  7. p-1-r rounds of a deferred W and a backward of d (split once step 6
//     switched);
//  8. the r+1 deferred W's left.
// Needs v == 2 and m >= 2p.
Result<Schedule> make_dualpipev(const ScheduleParams& params);

// DualPipe, bidirectional, in the order of DeepSeek's reference
// implementation (dualpipe/dualpipe.py, DualPipe.step): the model cut into
// p stages held twice, so that half of the microbatches (0..m/2-1) enter at
// rank 0 and flow through stages 0..p-1 on ranks 0..p-1, and the other half
// (m/2..m-1) enter at rank p-1 and flow through stages p..2p-1 on ranks
// p-1..0 (Schedule::num_chains = 2; stage p+k holds stage k's layers). Rank
// r owns stages r and 2p-1-r, as in DualPipeV, and runs DualPipeV's eight
// steps for a V of p/2 ranks and m/2 microbatches as rank min(r, p-1-r) of
// it, its down stage the one of the direction that enters nearer it (stage
// r on the first half of the ranks, 2p-1-r on the second).
// Needs v == 2, p and m even and m >= 2p.
Result<Schedule> make_dualpipe(const ScheduleParams& params);

}  // namespace ppsim
