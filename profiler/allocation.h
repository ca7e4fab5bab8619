// How the CPU kernels' buffers come from the heap, the same for the profiler
// and the runtime so that a profiled kernel costs what it costs in a run.
#pragma once

namespace ppsim::kernels {

// Keeps freed heap memory in the process instead of returning it to the
// system, as a training framework's caching allocator does: glibc otherwise
// serves large buffers with fresh mmaps and trims the heap top on free, so a
// kernel that allocates what it saves for backward (a forward) pays a page
// fault per 4 KiB every time. That cost appears where allocations and frees
// alternate (a profiler's loop) and hardly in a pipeline run, which keeps
// many microbatches' buffers live: measured on cpu-small's block forward,
// 15.8 ms with the defaults against 13.2 ms retained (59k vs 11k minor page
// faults for the whole profile; docs/validation.md). Process-wide and
// idempotent; a no-op where the C library has no such knobs.
void retain_freed_memory();

}  // namespace ppsim::kernels
