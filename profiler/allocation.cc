#include "profiler/allocation.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ppsim::kernels {

void retain_freed_memory() {
#if defined(__GLIBC__)
  // Buffers up to 32 MiB (glibc's largest mmap threshold) come from the
  // heap, and the heap top is never given back.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

}  // namespace ppsim::kernels
