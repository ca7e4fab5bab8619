// The executor every backend runs on each rank: the rank's program, action
// by action, iteration after iteration, against the stages it owns, then
// the synchronous optimizer step (asynchronous schedules step in their S
// actions instead); and what it measured (action records, transfers,
// epilogue, peak activation bytes, losses, final weights). The
// backends differ only in the Transport (transport.h), in the stages' type
// (StageCompute<S> on the CPU, GpuStage on a GPU) and in how they start
// ranks and collect their RankLogs. Internal to real_runtime/.
//
// A Stage is what StageCompute<S> (stage_compute.h) offers: `Tensor`, the
// type its activations and gradients travel as; forward, backward_input,
// backward_weight, backward, sgd_step; held_bytes, activation_bytes,
// weight_grad_bytes; weights, max_weight_versions, weight_bytes; first,
// last. The member definitions are in rank_executor_impl.h, instantiated in
// rank_executor.cc for the CPU stages and beside each other stage type.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "real_runtime/runtime.h"
#include "real_runtime/stage_compute.h"
#include "real_runtime/transport.h"

namespace ppsim::runtime {

// A checked run: what every rank's executor needs, the same on each rank.
struct RunPlan {
  const Schedule* schedule = nullptr;
  RuntimeModel model;
  RunSettings settings;
  std::vector<int> lengths;             // tokens per slice
  std::optional<Action> fail_action;    // settings.fail_at's action, parsed
  std::vector<int32_t> program_offset;  // per rank, record index of its first action
  int64_t per_iteration = 0;            // actions per iteration
  bool steps_in_programs = false;       // S actions step; no barrier, no epilogue
};

// Checks that the runtime can run `schedule` on `model` (a valid schedule
// whose stages all step in S actions or none does, a model it splits, at
// least one iteration, a parseable fail_at).
Result<RunPlan> plan_run(const Schedule& schedule, const RuntimeModel& model,
                         const RunSettings& settings);

// What one stage left at the end of the run.
struct StageLog {
  int stage = 0;
  std::vector<Timeline::StageMemory> memory;  // per slice
  StageWeights weights;
  int weight_versions = 1;   // the most held at once
  int64_t weight_bytes = 0;  // of one version
};

// What one rank measured.
struct RankLog {
  std::vector<ActionRecord> actions;  // iteration-major, in program order
  std::vector<TransferRecord> transfers;
  std::vector<EpilogueRecord> epilogue;
  std::vector<double> losses;  // per iteration; empty but at the last stage's rank
  int64_t held = 0, peak = 0;
  std::vector<StageLog> stages;  // the rank's stages, after a run that did not fail
};

template <typename Stage>
class RankExecutor {
 public:
  using Tensor = typename Stage::Tensor;
  // Makes stage `s` of the schedule (one the rank owns).
  using StageFactory = std::function<std::unique_ptr<Stage>(int s)>;

  // Builds the rank's stages. REQUIRES: `plan` from plan_run; `transport`
  // and `clock` outlive the executor.
  RankExecutor(const RunPlan& plan, int rank, Transport<Tensor>* transport, const RunClock* clock,
               const StageFactory& make_stage);
  ~RankExecutor();
  RankExecutor(const RankExecutor&) = delete;
  RankExecutor& operator=(const RankExecutor&) = delete;

  // Runs every iteration; nothing thrown inside leaves it. Returns false
  // when the rank failed ("rank 1, 1F3: <what>" went to the transport's
  // fail) or stopped because another rank did.
  bool run();
  // The measurements; after a successful run() also the stages' results.
  RankLog& log() { return log_; }

 private:
  // What an action sends on, if anything.
  struct Output {
    Tensor data;
    bool send = false;
    int to_stage = 0;
    MessageKind kind = MessageKind::kActivation;
  };

  Tensor receive(MessageKind kind, const Action& a, int32_t index);
  void send(MessageKind kind, const Action& a, int to_stage, Tensor data, int32_t index);
  // Throws where RunSettings::fail_at names this action.
  void fail_if_asked(int it, const Action& a) const;
  // The activation or gradient the action at record `index` needs from another stage.
  Tensor input_of(const Action& a, int32_t index);
  // Runs the action and records it.
  Output compute(int it, const Action& a, int32_t index, const Tensor& in);
  void hand_on(const Action& a, Output out, int32_t index);
  void execute(int it, const Action& a, int32_t index);
  // An overlapped pair (Action::overlaps_next): `forward` at record `index`,
  // `backward` after it.
  void execute_pair(int it, const Action& forward, const Action& backward, int32_t index);
  void epilogue(int it);

  const RunPlan& plan_;
  const Schedule& schedule_;
  int rank_;
  Transport<Tensor>* transport_;
  const RunClock* clock_;
  std::vector<std::unique_ptr<Stage>> stages_;  // by stage; null for other ranks'
  RankLog log_;
};

// The CPU stages of a plan.
template <typename S>
typename RankExecutor<StageCompute<S>>::StageFactory cpu_stage_factory(const RunPlan& plan) {
  return [&plan](int s) {
    const Schedule& schedule = *plan.schedule;
    return std::make_unique<StageCompute<S>>(plan.model, s, schedule.num_stages,
                                             schedule.num_microbatches, plan.lengths);
  };
}

extern template class RankExecutor<StageCompute<float>>;
extern template class RankExecutor<StageCompute<double>>;

// Runs `fn(S{})` (S: float or double, the model's precision); an exception
// (allocating the model or the logs) becomes the Error "`what`: <what>".
template <typename Fn>
Result<RunResult> in_precision(const RunPlan& plan, const std::string& what, Fn fn) {
  try {
    if (plan.model.precision == Precision::kFloat64) return fn(double{});
    return fn(float{});
  } catch (const std::exception& e) {
    return Error{what + ": " + e.what()};
  }
}

// The measured run from every rank's log (indexed by rank): the Timeline
// in the simulator's layout, the weights by stage, the losses.
RunResult assemble(const RunPlan& plan, int scalar_bytes, std::vector<RankLog> logs);

}  // namespace ppsim::runtime
