// Simulations side by side: every item of a list handed to a pool of
// threads, each with an Engine of its own that keeps its buffers from one
// simulation to the next. Callers write results to per-item slots, so the
// order of completion never shows in what they return (the explorer and the
// measured-runs fit give the same results for any thread count).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "sim/engine/engine.h"

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
// An exception that escapes fn (an allocation that fails on a large item)
// stops the other threads at their next item and is rethrown here, after
// they have all been joined, for the tool's main to report.
template <typename Fn>
void parallel_for(const std::vector<size_t>& items, std::vector<Engine>& engines, Fn fn) {
  std::atomic<size_t> next{0};
  std::mutex failure_mu;
  std::exception_ptr failure;
  const auto worker = [&](size_t t) {
    try {
      for (size_t k = next++; k < items.size(); k = next++) fn(items[k], engines[t]);
    } catch (...) {
      next = items.size();
      std::lock_guard<std::mutex> lock(failure_mu);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(engines.size(), items.size()); ++t) {
    try {
      pool.emplace_back(worker, t);
    } catch (const std::system_error&) {
      break;  // the system gives no more threads: the ones running share the items
    }
  }
  worker(0);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ppsim
