// Simulations side by side: every item of a list handed to a pool of
// threads, each with an Engine of its own that keeps its buffers from one
// simulation to the next. Callers write results to per-item slots, so the
// order of completion never shows in what they return (the explorer and the
// measured-runs fit give the same results for any thread count).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "sim/engine.h"

namespace ppsim {

// The number of threads for `requested` (0: one per core), at least one.
inline unsigned thread_count(int requested) {
  return requested > 0 ? static_cast<unsigned>(requested)
                       : std::max(1u, std::thread::hardware_concurrency());
}

// Runs fn(item, engine) for every item of `items`, on up to engines.size()
// threads (never more than the items), thread t with engines[t].
// REQUIRES: !engines.empty(); fn is safe to call from several threads for
// different items.
template <typename Fn>
void parallel_for(const std::vector<size_t>& items, std::vector<Engine>& engines, Fn fn) {
  std::atomic<size_t> next{0};
  const auto worker = [&](size_t t) {
    for (size_t k = next++; k < items.size(); k = next++) fn(items[k], engines[t]);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(engines.size(), items.size()); ++t) pool.emplace_back(worker, t);
  worker(0);
  for (std::thread& t : pool) t.join();
}

}  // namespace ppsim
