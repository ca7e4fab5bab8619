// The checks across a config's sections, once each is read: the GPU
// arithmetic, the batch against the microbatches, the model against the
// layout, and what context and expert parallelism need.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "schedules/limits.h"
#include "sim/config/config.h"
#include "sim/config/config_loader.h"

namespace ppsim {
namespace config_internal {
namespace {

// Saturates instead of overflowing: a product that large is wrong input anyway.
int64_t product(std::initializer_list<int64_t> factors) {
  int64_t result = 1;
  for (int64_t factor : factors) {
    if (__builtin_mul_overflow(result, factor, &result)) return INT64_MAX;
  }
  return result;
}

}  // namespace

std::string context_misfit(int cp, const ModelSpec& model) {
  if (model.seq_len % (2 * int64_t{cp}) != 0) {
    return fmt::format(
        "needs model.seq_len ({}) to be a multiple of 2 x {} = {}: each sequence is cut into 2 x "
        "context equal chunks",
        model.seq_len, cp, 2 * int64_t{cp});
  }
  if (model.attention != Attention::kFlash) {
    return "needs model.attention: flash: the keys and values pass around the ring inside the "
           "fused attention kernel (Megatron-Core with Transformer Engine)";
  }
  return "";
}

// Expert parallelism as Megatron-Core places it: the EP GPUs of an expert
// group are data-parallel (or context) ranks, each holding experts / EP.
void Loader::check_expert(const Config& config, const Sections& tree) const {
  const Value expert = tree.parallel.get("expert");
  const int ep = config.parallel.expert;
  if (!config.model || !config.model->moe) {
    throw_error(expert.key_mark, expert.path,
                "needs model.moe: it splits the experts of its layers");
  }
  if (config.model->moe->experts % ep != 0) {
    throw_error(
        expert.mark(), expert.path,
        fmt::format("{} must divide model.moe.experts ({})", ep, config.model->moe->experts));
  }
  if (config.parallel.weight_replicas() % ep != 0) {
    throw_error(
        expert.mark(), expert.path,
        fmt::format("{} must divide data x context ({} x {}): the expert groups are made of "
                    "data-parallel ranks",
                    ep, config.parallel.data, config.parallel.context));
  }
}

// FP8 GEMMs need the analytic model (a profile times the model's dtype), a
// GPU with FP8 tensor cores and a 16-bit model whose linear layers cast to
// FP8 (Transformer Engine's rule: fp32 training has no FP8 recipe).
void Loader::check_fp8(const Config& config, const Sections& tree) const {
  const Value fp8 = tree.training.get("fp8");
  if (!config.model) {
    throw_error(fp8.key_mark, fp8.path, "needs a model: it decides which GEMMs run in FP8");
  }
  if (!config.profile_path.empty()) {
    throw_error(fp8.key_mark, fp8.path,
                "cannot be combined with costs.profile: a profile times the model's dtype");
  }
  if (config.model->dtype == DType::kFp32) {
    throw_error(fp8.mark(), fp8.path,
                fmt::format("{} needs model.dtype bf16 or fp16: FP8 casts a 16-bit model's "
                            "linear layers",
                            ppsim::to_string(config.training.fp8)));
  }
  if (config.hardware && config.hardware->peak_tflops_fp8 <= 0) {
    throw_error(fp8.mark(), fp8.path,
                fmt::format("{} needs hardware.peak_tflops_fp8: hardware {} gives none (a GPU "
                            "without FP8 tensor cores, as the A100)",
                            ppsim::to_string(config.training.fp8), config.hardware->name));
  }
  if (config.training.fp8 == Fp8Recipe::kMxfp8 && config.hardware &&
      config.hardware->compute_capability < 10) {
    throw_error(fp8.mark(), fp8.path,
                fmt::format("mxfp8 needs hardware.compute_capability 10.0 or more (Blackwell's "
                            "block-scaled tensor cores; Transformer Engine refuses MXFP8 "
                            "below): hardware {} gives {}",
                            config.hardware->name, config.hardware->compute_capability));
  }
}

// A graph replays fixed shapes: a dropless MoE layer's token counts, which
// size its exchange and its experts' GEMMs, change every step
// (Megatron-Core captures a MoE layer only padded to a capacity).
void Loader::check_cuda_graph(const Config& config, const Sections& tree) const {
  const Value scope = tree.training.get("cuda_graph_scope");
  if (config.model && config.model->moe && config.model->moe->capacity_factor <= 0) {
    throw_error(scope.mark(), scope.path,
                "full_iteration needs fixed shapes: model.moe is dropless (no capacity_factor), "
                "so its token counts change every step; give the experts a capacity");
  }
}

// Context parallelism as Megatron-Core runs it: the sequence in 2 cp equal
// chunks, and the ring exchange inside the fused attention kernel
// (Transformer Engine), which token slices do not combine with.
void Loader::check_context(const Config& config, const Sections& tree) const {
  const Value context = tree.parallel.get("context");
  const int cp = config.parallel.context;
  if (config.schedule.kind == ScheduleKind::kTeraPipe) {
    throw_error(
        context.key_mark, context.path,
        "cannot be combined with schedule.kind terapipe: token slices of a sequence that is "
        "already split over the context ranks are not modelled");
  }
  if (!config.profile_path.empty()) {
    throw_error(
        context.key_mark, context.path,
        "cannot be combined with costs.profile: a profile times a layer on the whole sequence, "
        "without the context ring");
  }
  if (!config.model) return;
  if (const std::string misfit = context_misfit(cp, *config.model); !misfit.empty()) {
    throw_error(context.mark(), context.path, fmt::format("{} {}", cp, misfit));
  }
}

void Loader::check_cross_fields(const Config& config, const Sections& tree) const {
  check_slicing(config, tree);
  check_cost_sources(config, tree);
  check_tensor_features(config, tree);
  check_sizes(config, tree);
  if (config.model) check_model_split(config, tree);
  if (config.parallel.context > 1) check_context(config, tree);
  if (config.parallel.expert > 1) check_expert(config, tree);
  if (config.training.fp8 != Fp8Recipe::kNone) check_fp8(config, tree);
  if (config.training.cuda_graphs.has(CudaGraphScope::kFullIteration))
    check_cuda_graph(config, tree);
  if (!config.parallel.layers_per_stage.empty()) check_layers_per_stage(config, tree);
}

// Token slicing and pipeline flushes: what the schedule asks of the model.
void Loader::check_slicing(const Config& config, const Sections& tree) const {
  const ScheduleSpec& sched = config.schedule;
  if (sched.slicing == SlicingMethod::kOptimal && !config.model) {
    throw_expected(tree.schedule.get("slicing"),
                   "even when there is no model: the optimal cut needs the model's costs");
  }
  if (const std::string misfit = flushes_misfit(config); !misfit.empty()) {
    const Value flushes = tree.schedule.get("flushes");
    throw_error(flushes.mark(), flushes.path, misfit, flushes.file);
  }
  if (config.model && sched.slices > 0 && config.model->seq_len % sched.slices != 0) {
    throw_expected(tree.schedule.get("slices"),
                   fmt::format("a divisor of model.seq_len ({})", config.model->seq_len));
  }
  if (config.model && sched.slice_granularity > 0 &&
      config.model->seq_len % sched.slice_granularity != 0) {
    throw_expected(tree.schedule.get("slice_granularity"),
                   fmt::format("a divisor of model.seq_len ({})", config.model->seq_len));
  }
}

// Where the costs come from: a model with hardware, a profile, or fixed
// times, and what each can and cannot price.
void Loader::check_cost_sources(const Config& config, const Sections& tree) const {
  const ScheduleSpec& sched = config.schedule;
  const ParallelSpec& par = config.parallel;
  if (!config.model && (config.fixed.forward_s.empty() || config.fixed.backward_s.empty())) {
    throw_error(tree.fixed.self().key_mark, "model",
                "required unless costs.fixed gives forward_s and backward_s");
  }
  // A profile times the layers by itself; the embedding, logits, transfers
  // and end-of-iteration work are then 0 (docs/cost_model.md, costs.profile).
  if (config.model && !config.hardware && config.profile_path.empty()) {
    throw_error(tree.hardware.self().key_mark, "hardware",
                "required when model is given, unless costs.profile gives the layer times");
  }
  if (!config.profile_link.empty() && config.profile_path.empty()) {
    const Value link = tree.costs.get("link");
    throw_error(link.key_mark, link.path, "needs costs.profile: the link is one of the profile's");
  }
  if (const char* key = config.model && !config.profile_path.empty()
                            ? gpt_block_misfit(*config.model)
                            : nullptr) {
    const Value field = tree.model.get(key);
    throw_error(field.key_mark, field.path,
                fmt::format("cannot be combined with costs.profile: a profile times the GPT-3 "
                            "block the profilers build ({}), looked up by hidden, ffn and heads",
                            kGpt3BlockParts),
                field.file);
  }
  if (!config.profile_path.empty() && !config.model) {
    const Value profile = tree.costs.get("profile");
    throw_error(profile.key_mark, profile.path,
                "needs a model: the profile's kernels are looked up by the model's shape");
  }
  if (sched.slicing == SlicingMethod::kOptimal && config.model && !config.hardware) {
    const Value slicing = tree.schedule.get("slicing");
    throw_error(slicing.key_mark, slicing.path,
                "optimal needs hardware: the cut is chosen with the analytic model's times");
  }
  if (par.p2p_scatter_gather && !config.profile_path.empty()) {
    const Value scatter = tree.parallel.get("p2p_scatter_gather");
    throw_error(scatter.key_mark, scatter.path,
                "needs the analytic model: a profile's link is a measured transfer of the whole "
                "activation, not its pieces and their all-gather");
  }
}

// The tensor-parallel features that need sequence parallelism.
void Loader::check_tensor_features(const Config& config, const Sections& tree) const {
  const ParallelSpec& par = config.parallel;
  if (par.tp_comm_overlap && !par.sequence_parallel) {
    const Value overlap = tree.parallel.get("tp_comm_overlap");
    throw_error(
        overlap.key_mark, overlap.path,
        "needs parallel.sequence_parallel: the overlapped collectives are its all-gathers and "
        "reduce-scatters (as Megatron's --tp-comm-overlap)");
  }
  if (config.model && moe_lacks_sequence_parallel(*config.model, par)) {
    const Value tensor = tree.parallel.get("tensor");
    throw_error(
        tensor.mark(), tensor.path,
        fmt::format("{} with model.moe needs parallel.sequence_parallel: true: the experts' "
                    "all-to-all dispatch routes each tensor rank's share of the sequence, as "
                    "Megatron-Core requires",
                    par.tensor));
  }
}

// The layout against the machine and the batch, and the schedule's size.
void Loader::check_sizes(const Config& config, const Sections& tree) const {
  const ParallelSpec& par = config.parallel;
  const ScheduleSpec& sched = config.schedule;
  if (config.hardware) {
    const HardwareSpec& hw = *config.hardware;
    int64_t gpus = product({par.pipeline, par.tensor, par.context, par.data});
    if (gpus != int64_t{hw.gpus_per_node} * hw.nodes) {
      const std::string context =
          par.context > 1 ? fmt::format(" x context {}", par.context) : std::string();
      throw_error(
          tree.parallel.self().key_mark, "parallel",
          fmt::format("pipeline {} x tensor {}{} x data {} = {} GPUs, but hardware has {} nodes "
                      "x {} = {}",
                      par.pipeline, par.tensor, context, par.data, gpus, hw.nodes, hw.gpus_per_node,
                      int64_t{hw.gpus_per_node} * hw.nodes));
    }
  }
  int64_t samples_per_microbatch = int64_t{config.training.micro_batch} * par.data;
  if (config.training.global_batch % samples_per_microbatch != 0) {
    Value global_batch = tree.training.get("global_batch");
    throw_error(global_batch.mark(), global_batch.path,
                fmt::format("{} is not divisible by micro_batch {} x data {}",
                            config.training.global_batch, config.training.micro_batch, par.data));
  }
  // The schedule's sizes, named by the keys that set them, before anything
  // is allocated for it.
  const Status size = check_schedule_size(par.pipeline, int64_t{par.pipeline} * par.virtual_stages,
                                          config.training.global_batch / samples_per_microbatch,
                                          std::max(1, sched.slices));
  if (!size) {
    throw_error(
        tree.parallel.self().key_mark, "parallel",
        fmt::format("{} (stages: pipeline x virtual_stages; microbatches: "
                    "training.global_batch / (micro_batch x data); slices: schedule.slices)",
                    size.message()));
  }
}

// The model's layers and heads against the stages and tensor ranks.
void Loader::check_model_split(const Config& config, const Sections& tree) const {
  const ParallelSpec& par = config.parallel;
  if (config.model->layers < config.model_stages() && par.layers_per_stage.empty()) {
    throw_expected(tree.model.get("layers"),
                   fmt::format("at least {} = {} (a layer per stage; "
                               "parallel.layers_per_stage may leave stages empty)",
                               config.model_stages_formula("pipeline x virtual_stages"),
                               config.model_stages()));
  }
  if (config.model->heads % par.tensor != 0) {
    throw_expected(tree.model.get("heads"),
                   fmt::format("a multiple of parallel.tensor ({})", par.tensor));
  }
  // Megatron-LM splits the KV heads over the tensor ranks, or, with more
  // ranks than KV heads, gives each rank a copy of one.
  const int kv_heads = config.model->kv_heads;
  if (kv_heads % par.tensor != 0 && par.tensor % kv_heads != 0) {
    throw_expected(tree.model.get("kv_heads"),
                   fmt::format("a multiple or a divisor of parallel.tensor ({})", par.tensor));
  }
}

// An explicit split: one entry per stage, summing to the layers.
void Loader::check_layers_per_stage(const Config& config, const Sections& tree) const {
  const ParallelSpec& par = config.parallel;
  const Value split = tree.parallel.get("layers_per_stage");
  if (!config.model) {
    throw_error(split.key_mark, split.path, "only with a model: it splits model.layers");
  }
  if (static_cast<int64_t>(par.layers_per_stage.size()) != config.model_stages()) {
    throw_expected(split, fmt::format("{} entries, one per stage ({})", config.model_stages(),
                                      config.model_stages_formula("pipeline x virtual_stages")));
  }
  int64_t sum = 0;
  for (int layers : par.layers_per_stage) sum += layers;
  if (sum != config.model->layers) {
    throw_expected(split,
                   fmt::format("entries summing to model.layers ({})", config.model->layers));
  }
}

}  // namespace config_internal
}  // namespace ppsim
