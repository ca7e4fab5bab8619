// The delayed sequential reference (run_delayed_reference): the training
// that an asynchronous schedule's runtime must reproduce, computed without
// the runtime.
//
// Why it is independent of the executor: nothing here runs the schedule.
// The weight versions come from reading each rank's program as text (count
// the S actions of a stage before its F; find the S after its B or W); the
// versions live in an explicit history of whole weight sets (no pins, no
// copy on write, no reference counts); and microbatches run one at a time,
// forward and backward through the whole model on one thread, with each
// stage's blocks loaded at the version that stage's F would have used. What
// it shares with the runtime is the model's arithmetic (the kernels, through
// a one-stage StageCompute as run_sequential uses them), not the stashing,
// the stepping or the order of execution.
#include <fmt/format.h>

#include <map>
#include <stdexcept>
#include <vector>

#include "real_runtime/runtime.h"
#include "real_runtime/stage_compute.h"
#include "schedules/validate.h"

namespace ppsim::runtime {
namespace {

// What the programs say about weight versions. Steps are numbered per stage
// across iterations: step j of iteration `it` is it * steps[stage] + j, and
// version k is the stage's weights after k steps.
struct Delays {
  std::vector<int> steps;  // per stage, per iteration
  // [stage][mb]: the stage's steps in an iteration before the microbatch's
  // first F, and the step of the iteration that applies its gradient
  // (steps[stage] when that is the next iteration's first step).
  std::vector<std::vector<int>> forward_version, applied_by;
};

// A schedule without S actions steps every stage once after its program.
Result<Delays> read_delays(const Schedule& schedule) {
  const int num_stages = schedule.num_stages, m = schedule.num_microbatches;
  Result<bool> asynchronous = steps_in_programs(schedule);
  if (!asynchronous) return asynchronous.error();
  Delays d;
  d.steps.assign(num_stages, 0);
  d.forward_version.assign(num_stages, std::vector<int>(m, 0));
  d.applied_by.assign(num_stages, std::vector<int>(m, -1));
  std::vector<std::vector<int>> unapplied(num_stages);  // microbatches, per weight-gradient action
  // The stage's gradients so far go to its next step (steps[stage]).
  const auto assign = [&](int stage) -> Status {
    for (int mb : unapplied[stage]) {
      int& by = d.applied_by[stage][mb];
      if (by >= 0 && by != d.steps[stage]) {
        return Error{fmt::format(
            "delayed reference: stage {} applies microbatch {}'s slices in different steps", stage,
            mb)};
      }
      by = d.steps[stage];
    }
    unapplied[stage].clear();
    return {};
  };
  const auto step = [&](int stage) -> Status {
    Status st = assign(stage);
    ++d.steps[stage];
    return st;
  };
  for (const auto& program : schedule.programs) {
    for (const Action& a : program) {
      switch (a.kind) {
        case ActionKind::kForward:
          if (a.slice == 0) d.forward_version[a.stage][a.microbatch] = d.steps[a.stage];
          break;
        case ActionKind::kBackward:
        case ActionKind::kBackwardWeight:
          unapplied[a.stage].push_back(a.microbatch);
          break;
        case ActionKind::kBackwardInput:
          break;
        case ActionKind::kStep:
          if (Status st = step(a.stage); !st) return Error{st.message()};
          break;
      }
    }
  }
  for (int s = 0; s < num_stages; ++s) {
    if (!*asynchronous) {
      if (Status st = step(s); !st) return Error{st.message()};
    }
    // Gradients after the last step of an iteration wait for the next one's first.
    if (Status st = assign(s); !st) return Error{st.message()};
  }
  return d;
}

// One stage's weights: every version so far, and for each step the sum of
// the gradients it applies and how many microbatches it still waits for.
struct History {
  std::vector<StageWeights> versions;
  std::map<int, StageWeights> gradient;
  std::map<int, int> waiting;
};

void add_into(const std::vector<double>& x, std::vector<double>* sum) {
  if (sum->empty()) sum->assign(x.size(), 0.0);
  for (size_t i = 0; i < x.size(); ++i) (*sum)[i] += x[i];
}

// Version k of a stage, made from version k - 1 and step k - 1's gradients
// once every microbatch of that step has been replayed.
const StageWeights& version(History& h, int stage, int k, double learning_rate) {
  while (static_cast<int>(h.versions.size()) <= k) {
    const int j = static_cast<int>(h.versions.size()) - 1;
    if (h.waiting[j] > 0) {
      throw std::logic_error(fmt::format(
          "stage {}'s weight version {} needs the gradient of a later microbatch; the reference "
          "replays microbatches in order",
          stage, j + 1));
    }
    StageWeights next = h.versions.back();
    const auto g = h.gradient.find(j);
    for (size_t t = 0; g != h.gradient.end() && t < next.tensors.size(); ++t) {
      const std::vector<double>& grad = g->second.tensors[t];
      for (size_t i = 0; i < grad.size(); ++i) next.tensors[t][i] -= learning_rate * grad[i];
    }
    if (g != h.gradient.end()) h.gradient.erase(g);
    h.versions.push_back(std::move(next));
  }
  return h.versions[k];
}

template <typename S>
RunResult replay(const Schedule& schedule, const RuntimeModel& model, const RunSettings& settings,
                 const Delays& d) {
  const int num_stages = schedule.num_stages, m = schedule.num_microbatches;
  const double lr = settings.learning_rate;
  std::vector<History> stages(num_stages);
  std::map<std::string, std::pair<int, int>> where;  // tensor -> (stage, index in its set)
  for (int s = 0; s < num_stages; ++s) {
    stages[s].versions.push_back(
        StageCompute<S>(model, s, num_stages, m, {model.seq_len}).weights());
    const StageWeights& w = stages[s].versions[0];
    for (size_t t = 0; t < w.names.size(); ++t) where[w.names[t]] = {s, static_cast<int>(t)};
    for (int it = 0; it < settings.iterations; ++it) {
      for (int mb = 0; mb < m; ++mb) ++stages[s].waiting[it * d.steps[s] + d.applied_by[s][mb]];
    }
  }
  // The whole model on one stage: weights loaded per microbatch.
  StageCompute<S> whole(model, 0, 1, m, {model.seq_len});
  RunResult result;
  for (int it = 0; it < settings.iterations; ++it) {
    double loss = 0;
    for (int mb = 0; mb < m; ++mb) {
      StageWeights assembled;
      for (int s = 0; s < num_stages; ++s) {
        const StageWeights& w =
            version(stages[s], s, it * d.steps[s] + d.forward_version[s][mb], lr);
        assembled.names.insert(assembled.names.end(), w.names.begin(), w.names.end());
        assembled.tensors.insert(assembled.tensors.end(), w.tensors.begin(), w.tensors.end());
      }
      whole.set_weights(assembled);
      whole.forward(it, mb, 0, {}, &loss);
      whole.backward(it, mb, 0, {});
      const StageWeights grads = whole.take_gradients();
      std::vector<int> applied_by(num_stages);
      for (int s = 0; s < num_stages; ++s) {
        applied_by[s] = it * d.steps[s] + d.applied_by[s][mb];
        --stages[s].waiting[applied_by[s]];
      }
      for (size_t t = 0; t < grads.names.size(); ++t) {
        const auto [s, index] = where.at(grads.names[t]);
        StageWeights& sum = stages[s].gradient[applied_by[s]];
        sum.tensors.resize(stages[s].versions[0].tensors.size());
        add_into(grads.tensors[t], &sum.tensors[index]);
      }
    }
    result.losses.push_back(loss);
  }
  for (int s = 0; s < num_stages; ++s) {
    result.weights.push_back(version(stages[s], s, settings.iterations * d.steps[s], lr));
  }
  result.timeline.iterations = settings.iterations;
  return result;
}

}  // namespace

Result<RunResult> run_delayed_reference(const Schedule& schedule, const RuntimeModel& model,
                                        const RunSettings& settings) {
  if (Status st = validate(schedule); !st) return Error{st.message()};
  if (Status st = check_model(model, schedule.num_stages); !st) return Error{st.message()};
  if (settings.iterations < 1) {
    return Error{
        fmt::format("run settings: iterations must be at least 1, got {}", settings.iterations)};
  }
  Result<Delays> delays = read_delays(schedule);
  if (!delays) return delays.error();
  try {
    if (model.precision == Precision::kFloat64) {
      return replay<double>(schedule, model, settings, *delays);
    }
    return replay<float>(schedule, model, settings, *delays);
  } catch (const std::exception& e) {
    return Error{fmt::format("delayed reference: {}", e.what())};
  }
}

}  // namespace ppsim::runtime
