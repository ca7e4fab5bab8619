// The threads backend: one std::thread per rank, pinned to a CPU of its
// own, runs that rank's RankExecutor; a tensor for another rank is copied
// by a thread of its link (transfer_worker.h) into the receiver's Mailbox,
// while the sender goes on. See runtime.h.
#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <memory>
#include <system_error>
#include <thread>

#include "real_runtime/ordered_links.h"
#include "real_runtime/rank_executor.h"
#include "real_runtime/runtime.h"
#include "real_runtime/transfer_worker.h"

namespace ppsim::runtime {
namespace {

// Pins the calling thread to the `rank`-th CPU this process may use (round
// robin when there are more ranks than CPUs), so a rank keeps its core and
// its caches as a GPU keeps its device. A hint: where the system refuses,
// the rank runs unpinned.
void pin_to_cpu(int rank) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  const int count = CPU_COUNT(&allowed);
  if (count == 0) return;
  int nth = rank % count;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || nth-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    return;
  }
}

template <typename S>
Result<RunResult> run_ranks(const RunPlan& plan) {
  const int num_ranks = plan.schedule->num_ranks;
  RunClock clock;
  CopyingTransport<kernels::Mat<S>> transport(
      num_ranks, &clock, directed_links(*plan.schedule),
      [](kernels::Mat<S> m, const DirectedLink&) { return kernels::Mat<S>(m); });
  std::vector<std::unique_ptr<RankExecutor<StageCompute<S>>>> ranks;
  for (int r = 0; r < num_ranks; ++r) {
    ranks.push_back(std::make_unique<RankExecutor<StageCompute<S>>>(plan, r, &transport, &clock,
                                                                    cpu_stage_factory<S>(plan)));
  }
  clock.start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  try {
    for (int r = 0; r < num_ranks; ++r) {
      threads.emplace_back([&ranks, r] {
        pin_to_cpu(r);
        ranks[r]->run();
      });
    }
  } catch (const std::system_error& e) {
    // The ranks already started would wait for the missing one forever.
    transport.abort_run(
        fmt::format("rank {}: cannot start its thread: {}", threads.size(), e.what()));
  }
  for (std::thread& t : threads) t.join();
  transport.close();
  if (transport.control().aborted()) return Error{transport.control().error()};
  std::vector<RankLog> logs;
  for (auto& rank : ranks) logs.push_back(std::move(rank->log()));
  return assemble(plan, sizeof(S), std::move(logs));
}

}  // namespace

Result<RunResult> run_threads(const Schedule& schedule, const RuntimeModel& model,
                              const RunSettings& settings) {
  Result<RunPlan> plan = plan_run(schedule, model, settings);
  if (!plan) return plan.error();
  return in_precision(*plan, "threads runtime",
                      [&](auto s) { return run_ranks<decltype(s)>(*plan); });
}

}  // namespace ppsim::runtime
