// The largest schedule ppsim builds and replays. Past these sizes a request
// is an error that names the cap, checked before anything is allocated, so
// that no size can overflow an int index or ask for more memory than a
// workstation has: ranks fit the engine's 16-bit rank field, indices stay far
// from INT_MAX, and the dense action index (stages x microbatches x slices
// per kind) stays under a few hundred MiB.
#pragma once

#include <cstdint>

#include "schedules/status.h"

namespace ppsim {

inline constexpr int64_t kMaxRanks = 16384;
inline constexpr int64_t kMaxStages = 65536;
inline constexpr int64_t kMaxMicrobatches = int64_t{1} << 22;  // of a stream, async included
inline constexpr int64_t kMaxSlices = 4096;
// Actions of one iteration's schedule, counted as 3 per (stage, microbatch,
// slice): F, and B or I with W. The engine replays a few iterations of it at
// about 150 bytes per action, so the largest schedule costs about 10 GiB.
inline constexpr int64_t kMaxScheduleActions = int64_t{1} << 25;

// The most actions a schedule of these sizes can hold (3 per cell).
int64_t max_schedule_actions(int64_t stages, int64_t microbatches, int64_t slices);
// OK when ranks, stages, microbatches and slices are each within their cap
// and the schedule fits kMaxScheduleActions; otherwise an error naming the
// size and its cap.
Status check_schedule_size(int64_t ranks, int64_t stages, int64_t microbatches, int64_t slices);

}  // namespace ppsim
