// Asks for 2 MiB pages for the whole 2 MiB blocks of a buffer about to be
// filled: on a virtual machine each 4 KiB page fault costs microseconds, and
// a run touches every page of its buffers. Call it after reserving, before
// the first write.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <vector>

namespace ppsim {

template <typename T>
void advise_huge_pages(const std::vector<T>& buffer) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t data = reinterpret_cast<uintptr_t>(buffer.data());
  const uintptr_t begin = (data + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (data + buffer.capacity() * sizeof(T)) & ~(kHuge - 1);
  if (begin < end) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace ppsim
