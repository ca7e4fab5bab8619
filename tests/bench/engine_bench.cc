// The simulator is the explorer's inner loop: how many actions per second
// does one core replay? Run: build/bin/ppsim_bench
#include <benchmark/benchmark.h>

#include <random>

#include "schedules/generators.h"
#include "sim/config/config.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"
#include "sim/plan/explore.h"
#include "sim/plan/zb_auto.h"

namespace ppsim {
namespace {

// Uneven stages (forward 0.5x..1.5x of nominal, backward 1.5x..2.5x of its
// forward) and nonzero p2p, from a fixed seed.
CostTable uneven_costs(int stages, int ranks) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> spread(0.5, 1.5);
  CostTable c = uniform_costs(stages, ranks, 0, 0);
  for (StageCost& s : c.stages) {
    s.forward = static_cast<Picos>(1e9 * spread(rng));
    s.backward = static_cast<Picos>(s.forward * (1.0 + spread(rng)));
    s.activation_bytes = 1 << 30;
  }
  for (int b = 0; b + 1 < stages; ++b) {
    c.p2p_forward[b] = static_cast<Picos>(5e7 * spread(rng));
    c.p2p_backward[b] = static_cast<Picos>(5e7 * spread(rng));
  }
  return c;
}

// `record` false: what a summary reads only, as simulate, explore and
// calibrate run it (the replay in program order, program_order_replay.h);
// true: every record, as a trace needs (the event engine).
void run_bench(benchmark::State& state, const char* kind, bool record = true) {
  const int p = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const int v = static_cast<int>(state.range(2));
  const Schedule schedule = *make_schedule(*schedule_kind_named(kind), {p, m, v});
  const CostTable costs = uneven_costs(p * v, p);
  Engine engine;
  Timeline timeline;
  RunOptions options;
  options.record = record;
  for (auto _ : state) {
    if (!engine.run(schedule, costs, &timeline, options).ok()) state.SkipWithError("run failed");
    benchmark::DoNotOptimize(timeline.makespan);
  }
  state.counters["actions/s"] =
      benchmark::Counter(static_cast<double>(schedule.num_actions()) * state.iterations(),
                         benchmark::Counter::kIsRate);
  state.counters["actions"] = static_cast<double>(schedule.num_actions());
}

void BM_OneFOneB(benchmark::State& state) { run_bench(state, "1f1b"); }
void BM_Interleaved(benchmark::State& state) { run_bench(state, "interleaved-1f1b"); }
void BM_Gpipe(benchmark::State& state) { run_bench(state, "gpipe"); }
void BM_OneFOneBSummary(benchmark::State& state) { run_bench(state, "1f1b", false); }
void BM_InterleavedSummary(benchmark::State& state) { run_bench(state, "interleaved-1f1b", false); }

// zb-auto builds greedy candidates and replays each one: its cost is what a
// user waits for once per config (and the explorer per candidate layout).
void BM_ZbAuto(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  CostTable costs = uneven_costs(p, p);
  for (StageCost& s : costs.stages) s.weight_grad = s.backward / 2;
  const int64_t one_f_one_b_peak = int64_t{p} << 30;
  for (auto _ : state) {
    Result<Schedule> s = make_zb_auto(p, m, costs, one_f_one_b_peak);
    benchmark::DoNotOptimize(s.ok());
  }
}

// The explorer on the shipped GPT-3 175B / 1024-GPU sweep, every surviving
// candidate fully simulated: candidates decided per second (a closed-form
// calculator in Python manages about 500 per second on this machine).
void BM_ExploreGpt3(benchmark::State& state) {
  const Result<Sweep> sweep = load_sweep(PPSIM_SOURCE_DIR "/configs/sweeps/gpt3-175b-1024gpu.yaml");
  if (!sweep) {
    state.SkipWithError(sweep.error().message.c_str());
    return;
  }
  ExploreOptions options;
  options.threads = static_cast<int>(state.range(0));
  size_t candidates = 0;
  size_t simulated = 0;
  for (auto _ : state) {
    const ExploreResult r = explore(*sweep, options);
    candidates += r.candidates.size();
    for (const Candidate& c : r.candidates) simulated += c.summary.has_value();
  }
  state.counters["candidates/s"] =
      benchmark::Counter(static_cast<double>(candidates), benchmark::Counter::kIsRate);
  state.counters["simulated/s"] =
      benchmark::Counter(static_cast<double>(simulated), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_OneFOneB)->Args({64, 1024, 1})->Args({8, 64, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Interleaved)->Args({64, 1024, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpipe)->Args({64, 1024, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OneFOneBSummary)->Args({64, 1024, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_InterleavedSummary)->Args({64, 1024, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExploreGpt3)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ZbAuto)->Args({8, 64})->Args({64, 1024})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ppsim

BENCHMARK_MAIN();
