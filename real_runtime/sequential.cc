// The sequential reference (run_sequential), the weight comparison, and the
// runtime's reading of a config (model_for, check_executable).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "real_runtime/runtime.h"
#include "real_runtime/stage_compute.h"

namespace ppsim::runtime {
namespace {

template <typename S>
RunResult train_sequential(const RuntimeModel& model, int num_microbatches,
                           const RunSettings& settings) {
  // One stage holds the whole model; each microbatch runs forward and
  // backward whole before the next starts.
  StageCompute<S> stage(model, 0, 1, num_microbatches, {model.seq_len});
  RunResult result;
  for (int it = 0; it < settings.iterations; ++it) {
    double loss = 0;
    for (int mb = 0; mb < num_microbatches; ++mb) {
      stage.forward(it, mb, 0, {}, &loss);
      stage.backward(it, mb, 0, {});
    }
    stage.sgd_step(settings.learning_rate);
    result.losses.push_back(loss);
  }
  result.weights.push_back(stage.weights());
  result.timeline.iterations = settings.iterations;
  return result;
}

}  // namespace

Result<RunResult> run_sequential(const RuntimeModel& model, int num_microbatches,
                                 const RunSettings& settings) {
  if (Status st = check_model(model, 1); !st) return Error{st.message()};
  if (num_microbatches < 1 || settings.iterations < 1) {
    return Error{
        fmt::format("sequential run: microbatches and iterations must be at least 1, got {} and {}",
                    num_microbatches, settings.iterations)};
  }
  try {
    if (model.precision == Precision::kFloat64) {
      return train_sequential<double>(model, num_microbatches, settings);
    }
    return train_sequential<float>(model, num_microbatches, settings);
  } catch (const std::exception& e) {
    return Error{fmt::format("sequential run: {}", e.what())};
  }
}

RuntimeModel model_for(const Config& config, const std::vector<int>& slice_lengths) {
  PPSIM_CHECK(config.model.has_value());
  RuntimeModel model;
  model.layers = config.model->layers;
  model.hidden = config.model->hidden;
  model.ffn = config.model->ffn_hidden;
  model.heads = config.model->heads;
  model.seq_len = config.model->seq_len;
  model.vocab = config.model->vocab;
  model.micro_batch = config.training.micro_batch;
  model.dtype = config.model->dtype;
  model.slice_lengths = slice_lengths;
  return model;
}

Status check_executable(const Config& config, std::string_view tool) {
  const auto refuse = [&](std::string_view key, const std::string& value, std::string_view why,
                          const std::string& fix) {
    return Error{fmt::format(
        "{}: {}: {}: the runtime {}, so {} would measure a run other than the config's; set {}",
        config.source, key, value, why, tool, fix)};
  };
  if (config.parallel.data > 1) {
    return refuse("parallel.data", std::to_string(config.parallel.data),
                  "runs one pipeline replica", "parallel.data=1");
  }
  const std::vector<int>& split = config.parallel.layers_per_stage;
  if (!split.empty() && std::any_of(split.begin(), split.end(), [&](int layers) {
        return layers != split.front() ||
               layers * static_cast<int64_t>(split.size()) != config.model->layers;
      })) {
    return refuse("parallel.layers_per_stage", fmt::format("[{}]", fmt::join(split, ", ")),
                  "splits the layers evenly over the stages", "parallel.layers_per_stage=[]");
  }
  if (config.training.recompute != Recompute::kNone) {
    return refuse("training.recompute", to_string(config.training.recompute),
                  "keeps every activation and does not recompute", "training.recompute=none");
  }
  if (config.training.blocking_p2p) {
    return refuse("training.blocking_p2p", "true", "sends without waiting for the receive",
                  "training.blocking_p2p=false");
  }
  if (config.training.optimizer_step != OptimizerStep::kSynchronous) {
    return refuse(
        "training.optimizer_step", to_string(config.training.optimizer_step),
        "steps after a barrier at the end of each iteration",
        fmt::format("training.optimizer_step={}", to_string(OptimizerStep::kSynchronous)));
  }
  return {};
}

Result<double> max_relative_error(const std::vector<StageWeights>& a,
                                  const std::vector<StageWeights>& b) {
  const auto by_name = [](const std::vector<StageWeights>& set) {
    std::map<std::string, const std::vector<double>*> out;
    for (const StageWeights& s : set) {
      for (size_t t = 0; t < s.names.size(); ++t) out[s.names[t]] = &s.tensors[t];
    }
    return out;
  };
  const auto ta = by_name(a), tb = by_name(b);
  if (ta.size() != tb.size()) {
    return Error{
        fmt::format("weights differ in their tensors: {} against {}", ta.size(), tb.size())};
  }
  double worst = 0;
  for (const auto& [name, x] : ta) {
    const auto it = tb.find(name);
    if (it == tb.end() || it->second->size() != x->size()) {
      return Error{fmt::format("weights differ in tensor {}: missing or of another size", name)};
    }
    const std::vector<double>& y = *it->second;
    double diff = 0, scale = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      diff = std::max(diff, std::abs((*x)[i] - y[i]));
      scale = std::max(scale, std::abs(y[i]));
    }
    if (diff > 0) worst = std::max(worst, scale > 0 ? diff / scale : HUGE_VAL);
  }
  return worst;
}

}  // namespace ppsim::runtime
