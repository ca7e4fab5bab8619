// A config's sections (model, hardware, parallel, training, schedule and
// costs.fixed) and the public entry points. The YAML walker they are read
// with is in config_loader.{h,cc}; the checks across sections in
// config_checks.cc; a sweep's search: section in sweep_config.cc.
#include "sim/config/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "schedules/limits.h"
#include "sim/config/config_loader.h"
#include "sim/core/costs.h"
#include "sim/core/time.h"

namespace ppsim {
namespace config_internal {
namespace {

struct HardwareNumber {
  const char* key;
  double HardwareSpec::*member;
  Bound bound;
  bool required;  // no useful default: must come from the preset or inline
  // What any device or link of today or the next decade has, with room:
  // outside it the value is a slip of units (bytes/s for GB/s, seconds for
  // microseconds), and the figures would be confidently wrong.
  double plausible_min;
  double plausible_max;
  const char* unit;
};

// The largest sizes a config may give (schedules/limits.h has the schedule's):
// far past today's models (Llama 3 405B: 126 layers, hidden 16384, vocab
// 128256), and small enough that every product of them the cost model
// forms in 64-bit integers (parameters x 16 bytes, micro_batch x seq_len x
// hidden x 4 bytes) stays below 2^63.
constexpr int kMaxLayers = 16384;
constexpr int kMaxHidden = 1 << 17;
constexpr int kMaxFfnHidden = 1 << 20;
constexpr int kMaxTokens = 1 << 24;  // seq_len, vocab
constexpr int kMaxGroup = 1 << 20;   // tensor, data, GPUs per node, nodes
constexpr int kMaxGlobalBatch = 1 << 30;
constexpr int kMaxMicroBatch = 1 << 16;
// Mixture of experts: past DeepSeek-V3's 256 routed experts and one shared
// one of 2048, within the products above (layers x (experts + shared) x 3 x
// hidden x expert_ffn_hidden x 16 bytes < 2^63).
constexpr int kMaxExperts = 512;
constexpr int kMaxSharedExperts = 64;
// Multi-head latent attention: past DeepSeek-V3's ranks (1536, 512) and
// head widths (128 + 64, 128).
constexpr int kMaxHeadDim = 1 << 12;
const std::vector<std::string_view> kMlaKeys = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                                "qk_rope_head_dim", "v_head_dim"};
const std::vector<std::string_view> kMoeKeys = {
    "experts",      "top_k",           "expert_ffn_hidden", "shared_experts",
    "dense_layers", "capacity_factor", "imbalance",         "max_nodes_per_token"};

// Plausible ranges: a CPU core (0.05 TFLOP/s, 10 GB/s in cpu-2core.yaml) to
// a thousand times a B200 (2250 dense bf16 TFLOP/s, 8 TB/s HBM, 1.8 TB/s
// NVLink); memory up to 1 PiB; latencies and launch gaps up to a second.
constexpr double kMinTflops = 1e-4;
constexpr double kMaxTflops = 1e7;
constexpr double kMinGBps = 1e-3;
constexpr double kMaxGBps = 1e7;
constexpr double kMaxMicroseconds = 1e6;

constexpr HardwareNumber kHardwareNumbers[] = {
    {"memory_gib", &HardwareSpec::memory_gib, Bound::kPositive, true, 1e-3, 1 << 20, "GiB"},
    {"peak_tflops_bf16", &HardwareSpec::peak_tflops_bf16, Bound::kPositive, true, kMinTflops,
     kMaxTflops, "TFLOP/s"},
    {"peak_tflops_fp16", &HardwareSpec::peak_tflops_fp16, Bound::kPositive, true, kMinTflops,
     kMaxTflops, "TFLOP/s"},
    {"peak_tflops_fp32", &HardwareSpec::peak_tflops_fp32, Bound::kPositive, true, kMinTflops,
     kMaxTflops, "TFLOP/s"},
    {"peak_tflops_fp8", &HardwareSpec::peak_tflops_fp8, Bound::kNonNegative, false, 0, kMaxTflops,
     "TFLOP/s"},
    {"max_gemm_efficiency", &HardwareSpec::max_gemm_efficiency, Bound::kFraction, false, 0, 1,
     "of the peak"},
    {"sm_count", &HardwareSpec::sm_count, Bound::kNonNegative, false, 0, 1e5, "SMs"},
    {"gemm_tile_m", &HardwareSpec::gemm_tile_m, Bound::kPositive, false, 1, 4096, "rows"},
    {"gemm_tile_n", &HardwareSpec::gemm_tile_n, Bound::kPositive, false, 1, 4096, "columns"},
    {"compute_capability", &HardwareSpec::compute_capability, Bound::kNonNegative, false, 0, 100,
     "(major.minor)"},
    {"gemm_half_tile_efficiency", &HardwareSpec::gemm_half_tile_efficiency, Bound::kNonNegative,
     false, 0, 1, "of max_gemm_efficiency"},
    {"gemm_tile_k_overhead", &HardwareSpec::gemm_tile_k_overhead, Bound::kNonNegative, false, 0,
     1e5, "steps of K"},
    {"flash_forward_efficiency", &HardwareSpec::flash_forward_efficiency, Bound::kFraction, false,
     0, 1, "of the peak"},
    {"flash_backward_efficiency", &HardwareSpec::flash_backward_efficiency, Bound::kFraction, false,
     0, 1, "of the peak"},
    {"flash_key_overhead", &HardwareSpec::flash_key_overhead, Bound::kNonNegative, false, 0, 1e5,
     "keys"},
    {"hbm_bandwidth_gbps", &HardwareSpec::hbm_bandwidth_gbps, Bound::kPositive, true, kMinGBps,
     kMaxGBps, "GB/s"},
    {"hbm_efficiency", &HardwareSpec::hbm_efficiency, Bound::kFraction, false, 0, 1,
     "of the bandwidth"},
    {"kernel_launch_us", &HardwareSpec::kernel_launch_us, Bound::kNonNegative, false, 0,
     kMaxMicroseconds, "us"},
    {"action_overhead_us", &HardwareSpec::action_overhead_us, Bound::kNonNegative, false, 0,
     kMaxMicroseconds, "us"},
    {"host_launch_us", &HardwareSpec::host_launch_us, Bound::kNonNegative, false, 0,
     kMaxMicroseconds, "us"},
    {"dropout_rng_gsamples_per_s", &HardwareSpec::dropout_rng_gsamples_per_s, Bound::kNonNegative,
     false, 0, 1e6, "G elements/s"},
    {"comm_sm_fraction", &HardwareSpec::comm_sm_fraction, Bound::kProbability, false, 0, 1,
     "of the SMs"},
    {"intra_node_bandwidth_gbps", &HardwareSpec::intra_node_bandwidth_gbps, Bound::kPositive, true,
     kMinGBps, kMaxGBps, "GB/s"},
    {"intra_node_latency_us", &HardwareSpec::intra_node_latency_us, Bound::kNonNegative, false, 0,
     kMaxMicroseconds, "us"},
    {"inter_node_bandwidth_gbps", &HardwareSpec::inter_node_bandwidth_gbps, Bound::kPositive, true,
     kMinGBps, kMaxGBps, "GB/s"},
    {"inter_node_latency_us", &HardwareSpec::inter_node_latency_us, Bound::kNonNegative, false, 0,
     kMaxMicroseconds, "us"},
    {"p2p_latency_us", &HardwareSpec::p2p_latency_us, Bound::kNonNegative, false, 0,
     kMaxMicroseconds, "us"},
    {"p2p_bandwidth_gbps", &HardwareSpec::p2p_bandwidth_gbps, Bound::kNonNegative, false, 0,
     kMaxGBps, "GB/s"},
    {"intra_node_collective_efficiency", &HardwareSpec::intra_node_collective_efficiency,
     Bound::kFraction, false, 0, 1, "of the bandwidth"},
    {"inter_node_collective_efficiency", &HardwareSpec::inter_node_collective_efficiency,
     Bound::kFraction, false, 0, 1, "of the bandwidth"},
    {"collective_half_mb", &HardwareSpec::collective_half_mb, Bound::kNonNegative, false, 0, 1e6,
     "MB"},
};

struct FixedList {
  const char* key;
  std::vector<double> FixedCosts::*member;
  double max;  // the cost table's limit (sim/core/time.h, costs.h)
};

constexpr double kMaxBytesValue = static_cast<double>(kMaxBytes);
constexpr FixedList kFixedLists[] = {
    {"forward_s", &FixedCosts::forward_s, kMaxDurationSeconds},
    {"backward_s", &FixedCosts::backward_s, kMaxDurationSeconds},
    {"weight_grad_s", &FixedCosts::weight_grad_s, kMaxDurationSeconds},
    {"p2p_s", &FixedCosts::p2p_s, kMaxDurationSeconds},
    {"activation_bytes", &FixedCosts::activation_bytes, kMaxBytesValue},
    {"weight_grad_bytes", &FixedCosts::weight_grad_bytes, kMaxBytesValue},
    {"forward_comm_s", &FixedCosts::forward_comm_s, kMaxDurationSeconds},
    {"backward_comm_s", &FixedCosts::backward_comm_s, kMaxDurationSeconds},
};

// Keys a hardware preset file may hold; a config's hardware section also has
// preset, gpus_per_node and nodes.
std::vector<std::string_view> hardware_keys(bool in_config) {
  std::vector<std::string_view> keys = {"name"};
  for (const HardwareNumber& number : kHardwareNumbers) keys.push_back(number.key);
  for (const HardwarePresetInteger& integer : hardware_preset_integers()) {
    keys.push_back(integer.key);
  }
  if (in_config) keys.insert(keys.begin(), {"preset", "gpus_per_node", "nodes"});
  return keys;
}

// Keys a model preset file may hold; a config's model section also has preset.
std::vector<std::string_view> model_keys(bool in_config) {
  std::vector<std::string_view> keys = {
      "layers",         "hidden", "ffn_hidden", "heads", "kv_heads",  "seq_len",
      "vocab",          "dtype",  "mlp",        "norm",  "attention", "positions",
      "tie_embeddings", "bias",   "dropout",    "moe",   "mla",       "head_dim"};
  if (in_config) keys.insert(keys.begin(), "preset");
  return keys;
}

// A preset given as a path rather than a shipped name.
bool is_preset_path(std::string_view value) {
  return value.find('/') != std::string_view::npos || value.ends_with(".yaml");
}

// What a preset is called: its name, or its file's name without .yaml.
std::string preset_label(const std::string& value) {
  return is_preset_path(value) ? std::filesystem::path(value).stem().string() : value;
}

std::vector<std::string_view> fixed_keys() {
  std::vector<std::string_view> keys;
  for (const FixedList& list : kFixedLists) keys.push_back(list.key);
  return keys;
}

std::vector<std::string> preset_names(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// `s` holds the config's keys and its preset's (with_preset), so a value
// from either is read, and named in errors, the same way.
ModelSpec Loader::read_model(const Map& s) const {
  ModelSpec model;
  read_model_shape(s, model);
  read_model_block(s, model);
  if (s.has("moe")) model.moe = read_moe(nested_section(s, "moe", kMoeKeys), model);
  if (s.has("mla")) model.mla = read_mla(nested_section(s, "mla", kMlaKeys), s, model);
  return model;
}

// `model` (with kv_heads) holds the section `s` it came from.
MlaSpec Loader::read_mla(const Map& s, const Map& model_section, const ModelSpec& model) const {
  MlaSpec mla;
  read_int(s, "q_lora_rank", mla.q_lora_rank, 0, kMaxHidden);
  mla.kv_lora_rank = to_int(s.get("kv_lora_rank"), 1, kMaxHidden);
  mla.qk_nope_head_dim = to_int(s.get("qk_nope_head_dim"), 1, kMaxHeadDim);
  mla.qk_rope_head_dim = to_int(s.get("qk_rope_head_dim"), 0, kMaxHeadDim);
  mla.v_head_dim = to_int(s.get("v_head_dim"), 1, kMaxHeadDim);
  if (model.explicit_head_dim > 0) {
    throw_expected(model_section.get("head_dim"),
                   "no model.head_dim with model.mla: its qk_nope_head_dim, qk_rope_head_dim and "
                   "v_head_dim give the heads' widths");
  }
  if (model.kv_heads != model.heads) {
    throw_expected(model_section.get("kv_heads"),
                   fmt::format("model.heads ({}) with model.mla: every head has its own keys and "
                               "values, up-projected from the shared latent",
                               model.heads));
  }
  return mla;
}

MoeSpec Loader::read_moe(const Map& s, const ModelSpec& model) const {
  MoeSpec moe;
  moe.experts = to_int(s.get("experts"), 1, kMaxExperts);
  moe.top_k = to_int(s.get("top_k"), 1, moe.experts);
  moe.expert_ffn_hidden = to_int(s.get("expert_ffn_hidden"), 1, kMaxHidden);
  read_int(s, "shared_experts", moe.shared_experts, 0, kMaxSharedExperts);
  read_int(s, "dense_layers", moe.dense_layers, 0, model.layers - 1);
  read_int(s, "max_nodes_per_token", moe.max_nodes_per_token, 0, moe.experts);
  if (s.has("capacity_factor")) {
    moe.capacity_factor = to_number(s.get("capacity_factor"), Bound::kPositive);
  }
  if (s.has("imbalance")) {
    const Value field = s.get("imbalance");
    moe.imbalance = to_number(field, Bound::kPositive);
    if (moe.imbalance < 1 || moe.imbalance > moe.experts) {
      throw_expected(field, fmt::format("1 to experts ({}): the busiest expert's tokens over the "
                                        "mean",
                                        moe.experts));
    }
  }
  return moe;
}

void Loader::read_model_shape(const Map& s, ModelSpec& model) const {
  model.layers = to_int(s.get("layers"), 1, kMaxLayers);
  model.hidden = to_int(s.get("hidden"), 1, kMaxHidden);
  read_int(s, "ffn_hidden", model.ffn_hidden, 0, kMaxFfnHidden);
  if (model.ffn_hidden == 0) model.ffn_hidden = 4 * model.hidden;  // within kMaxFfnHidden
  model.heads = to_int(s.get("heads"), 1);
  model.seq_len = to_int(s.get("seq_len"), 1, kMaxTokens);
  model.vocab = to_int(s.get("vocab"), 1, kMaxTokens);
  if (s.has("head_dim")) {
    model.explicit_head_dim = to_int(s.get("head_dim"), 1, kMaxHeadDim);
  } else if (model.hidden % model.heads != 0) {
    throw_expected(s.get("heads"), fmt::format("a divisor of model.hidden ({}), or a "
                                               "model.head_dim to say each head's width",
                                               model.hidden));
  }
  read_int(s, "kv_heads", model.kv_heads, 0);
  if (model.kv_heads == 0) model.kv_heads = model.heads;
  if (model.heads % model.kv_heads != 0) {
    throw_expected(s.get("kv_heads"),
                   fmt::format("a divisor of model.heads ({}): each KV head serves a group of "
                               "query heads",
                               model.heads));
  }
}

// The block's variant: the defaults are GPT-3's, so that a config without
// these keys keeps its meaning.
void Loader::read_model_block(const Map& s, ModelSpec& model) const {
  if (s.has("dtype")) model.dtype = to_enum(s.get("dtype"), kDTypes);
  if (s.has("mlp")) model.mlp = to_enum(s.get("mlp"), kMlps);
  if (s.has("norm")) model.norm = to_enum(s.get("norm"), kNorms);
  if (s.has("attention")) model.attention = to_enum(s.get("attention"), kAttentions);
  if (s.has("positions")) model.positions = to_enum(s.get("positions"), kPositions);
  read_bool(s, "tie_embeddings", model.tie_embeddings);
  read_bool(s, "bias", model.bias);
  if (s.has("dropout")) model.dropout = to_number(s.get("dropout"), Bound::kProbability);
}

void Loader::read_hardware_fields(const Map& s, HardwareSpec& hardware) const {
  if (s.has("name")) {
    Value name = s.get("name");
    if (!name.node.IsScalar()) throw_expected(name, "a name");
    hardware.name = name.node.Scalar();
  }
  for (const HardwareNumber& number : kHardwareNumbers) {
    if (!s.has(number.key)) continue;
    const Value field = s.get(number.key);
    const double value = to_number(field, number.bound);
    if (value < number.plausible_min || value > number.plausible_max) {
      throw_expected(field, fmt::format("{:g} to {:g} {} (is it in another unit?)",
                                        number.plausible_min, number.plausible_max, number.unit));
    }
    hardware.*number.member = value;
  }
}

std::string Loader::preset_file(const Value& field, const std::string& dir) const {
  if (!field.present() || !field.node.IsScalar() || field.node.Scalar().empty()) {
    throw_expected(field, "a preset's name or the path of a YAML file");
  }
  const std::string& value = field.node.Scalar();
  if (is_preset_path(value)) {
    std::filesystem::path path = resolve_path(field);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      throw_error(field.mark(), field.path,
                  fmt::format("no such preset file: {}, {}", path.string(), got(field)),
                  field.file);
    }
    return path.string();
  }
  std::vector<std::string> names = preset_names(dir);
  if (std::find(names.begin(), names.end(), value) == names.end()) {
    throw_expected(field, names.empty()
                              ? fmt::format("the path of a YAML file, as {} has no presets", dir)
                              : fmt::format("one of the presets in {} (or a YAML file's path): {}",
                                            dir, fmt::join(names, ", ")));
  }
  return fmt::format("{}/{}.yaml", dir, value);
}

Map Loader::with_preset(Map s, const std::string& dir,
                        const std::vector<std::string_view>& keys) const {
  if (!s.has("preset")) return s;
  const std::string file = preset_file(s.get("preset"), dir);
  const Value root{s.self().path, parse_yaml(read_file(file), file), YAML::Mark(), file};
  s.add_missing(section(root, keys));
  return s;
}

// `s` holds the config's keys and its preset's (with_preset).
HardwareSpec Loader::read_hardware(const Map& s) const {
  HardwareSpec hardware;
  hardware.name = s.has("preset") ? preset_label(s.get("preset").node.Scalar()) : "custom";
  read_hardware_fields(s, hardware);
  for (const HardwarePresetInteger& integer : hardware_preset_integers()) {
    read_int(s, integer.key, hardware.*integer.member, 0);
  }
  read_int(s, "gpus_per_node", hardware.gpus_per_node, 1, kMaxGroup);
  read_int(s, "nodes", hardware.nodes, 1, kMaxGroup);
  for (const HardwareNumber& number : kHardwareNumbers) {
    if (number.required && hardware.*number.member == 0) {
      throw_expected(s.get(number.key), "a positive number (inline or from hardware.preset)");
    }
  }
  return hardware;
}

ParallelSpec Loader::read_parallel(const Map& s) const {
  ParallelSpec parallel;
  read_int(s, "pipeline", parallel.pipeline, 1, static_cast<int>(kMaxRanks));
  read_int(s, "tensor", parallel.tensor, 1, kMaxGroup);
  read_int(s, "data", parallel.data, 1, kMaxGroup);
  read_int(s, "context", parallel.context, 1, kMaxGroup);
  if (s.has("cp_comm")) parallel.context_comm = to_enum(s.get("cp_comm"), kContextComms);
  read_int(s, "expert", parallel.expert, 1, kMaxGroup);
  read_int(s, "virtual_stages", parallel.virtual_stages, 1, static_cast<int>(kMaxStages));
  read_bool(s, "sequence_parallel", parallel.sequence_parallel);
  read_bool(s, "tp_comm_overlap", parallel.tp_comm_overlap);
  read_bool(s, "tp_backward_overlap", parallel.tp_backward_overlap);
  read_bool(s, "p2p_scatter_gather", parallel.p2p_scatter_gather);
  // Only the values here; their count and sum are checked against the model
  // with the other cross-field checks. An empty list is no split of one's
  // own (the even one), as leaving the key out: `--set
  // parallel.layers_per_stage=[]` undoes a config's split.
  if (s.has("layers_per_stage")) {
    const Value field = s.get("layers_per_stage");
    if (!field.node.IsSequence()) {
      throw_expected(field,
                     "a list of integers >= 0, the layers of each stage (pipeline x "
                     "virtual_stages of them)");
    }
    for (size_t i = 0; i < field.node.size(); ++i) {
      const Value item{fmt::format("{}[{}]", field.path, i), field.node[i], field.mark(),
                       field.file};
      // 0: a stage with no transformer layer (the embedding or the head
      // alone, or a padding chunk, as Megatron-LM's no-op layer).
      parallel.layers_per_stage.push_back(to_int(item, 0, kMaxLayers));
    }
  }
  return parallel;
}

TrainingSpec Loader::read_training(const Map& s) const {
  TrainingSpec training;
  // Required: a default batch size would silently decide the bubble fraction.
  training.global_batch = to_int(s.get("global_batch"), 1, kMaxGlobalBatch);
  read_int(s, "micro_batch", training.micro_batch, 1, kMaxMicroBatch);
  if (s.has("recompute")) training.recompute = to_enum(s.get("recompute"), kRecomputes);
  read_int(s, "zero_stage", training.zero_stage, 0, 3);
  if (s.has("optimizer_step")) {
    training.optimizer_step = to_enum(s.get("optimizer_step"), kOptimizerSteps);
  }
  read_bool(s, "overlap_grad_reduce", training.overlap_grad_reduce);
  training.overlap_param_gather = training.overlap_grad_reduce;
  read_bool(s, "overlap_param_gather", training.overlap_param_gather);
  read_bool(s, "grad_accumulation_fusion", training.grad_accumulation_fusion);
  read_bool(s, "blocking_p2p", training.blocking_p2p);
  if (s.has("moe_dispatcher")) {
    training.moe_dispatcher = to_enum(s.get("moe_dispatcher"), kMoeDispatchers);
  }
  if (s.has("master_weights")) {
    training.master_weights = to_enum(s.get("master_weights"), kMasterWeights);
  }
  if (s.has("optimizer_moments")) {
    training.optimizer_moments = to_enum(s.get("optimizer_moments"), kMomentDTypes);
  }
  if (s.has("cross_entropy")) {
    training.cross_entropy = to_enum(s.get("cross_entropy"), kCrossEntropies);
  }
  if (s.has("fp8")) training.fp8 = to_enum(s.get("fp8"), kFp8Recipes);
  if (s.has("cuda_graph_scope")) training.cuda_graphs = to_cuda_graphs(s.get("cuda_graph_scope"));
  if (s.has("gradient_dtype")) {
    training.gradient_dtype = to_enum(s.get("gradient_dtype"), kGradientDTypes);
  }
  return training;
}

FixedCosts Loader::read_fixed(const Map& s, const ParallelSpec& parallel) const {
  FixedCosts fixed;
  int64_t stages = int64_t{parallel.pipeline} * parallel.virtual_stages;
  for (const FixedList& list : kFixedLists) {
    if (s.has(list.key)) fixed.*list.member = to_numbers(s.get(list.key), stages, list.max);
  }
  const std::vector<double>& w = fixed.weight_grad_s;
  const std::vector<double>& b = fixed.backward_s;
  for (size_t i = 0; !b.empty() && i < w.size(); ++i) {
    double backward = b.size() == 1 ? b[0] : b[i];
    if (w[i] > backward) {
      throw_error(
          s.get("weight_grad_s").mark(), s.child_path("weight_grad_s"),
          fmt::format(
              "stage {}: weight_grad_s {} is more than backward_s {}, of which it is a part", i,
              w[i], backward));
    }
  }
  return fixed;
}

// A custom schedule's CSV (see to_existing_file for relative paths).
std::string Loader::read_schedule_file(const Map& s, ScheduleKind kind) const {
  const Value file = s.get("file");
  if (kind != ScheduleKind::kCustom) {
    if (s.has("file")) throw_error(file.key_mark, file.path, "only for schedule.kind custom");
    return "";
  }
  return to_existing_file(file,
                          "the path of a CSV schedule, one row per rank (schedule.kind is custom)");
}

// Token slicing, for terapipe only: either a number of equal slices or the
// optimal cut, never a silent default.
void Loader::read_slicing(const Map& s, ScheduleSpec& schedule) const {
  const bool token_level = schedule.kind == ScheduleKind::kTeraPipe;
  for (const char* key : {"slices", "slicing", "slice_granularity"}) {
    if (!token_level && s.has(key)) {
      const Value field = s.get(key);
      throw_error(field.key_mark, field.path, "only for schedule.kind terapipe");
    }
  }
  if (!token_level) return;
  read_int(s, "slices", schedule.slices, 1, static_cast<int>(kMaxSlices));
  if (s.has("slicing")) schedule.slicing = to_enum(s.get("slicing"), kSlicings);
  read_int(s, "slice_granularity", schedule.slice_granularity, 1, kMaxTokens);
  if (schedule.slicing == SlicingMethod::kEven && schedule.slices == 0) {
    throw_expected(s.get("slices"),
                   "a number of token slices per microbatch (or schedule.slicing: optimal)");
  }
  if (schedule.slicing == SlicingMethod::kOptimal && s.has("slices")) {
    const Value field = s.get("slices");
    throw_error(field.key_mark, field.path,
                "not with schedule.slicing: optimal, which chooses the cut");
  }
}

Config Loader::load(YAML::Node root) const {
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  Value top_field{"", root, YAML::Mark(), ""};
  std::vector<std::string_view> top_keys = {"model",    "hardware", "parallel",
                                            "training", "schedule", "costs"};
  if (search_ != nullptr) top_keys.push_back("search");
  if (!root.IsMap()) {
    throw_expected(top_field, fmt::format("a map with keys {}", fmt::join(top_keys, ", ")));
  }
  for (const ConfigOverride& flag : overrides_) apply(root, flag);
  Map top = section(top_field, top_keys);
  Map costs = section(top.get("costs"), {"fixed", "profile", "link"});
  Sections tree{
      .model = with_preset(section(top.get("model"), model_keys(true)), model_preset_dir(),
                           model_keys(false)),
      .hardware = with_preset(section(top.get("hardware"), hardware_keys(true)),
                              hardware_preset_dir(), hardware_keys(false)),
      .parallel = section(top.get("parallel"),
                          {"pipeline", "tensor", "data", "context", "cp_comm", "expert",
                           "virtual_stages", "sequence_parallel", "tp_comm_overlap",
                           "tp_backward_overlap", "p2p_scatter_gather", "layers_per_stage"}),
      .training =
          section(top.get("training"),
                  {"global_batch", "micro_batch", "recompute", "zero_stage", "optimizer_step",
                   "overlap_grad_reduce", "overlap_param_gather", "grad_accumulation_fusion",
                   "blocking_p2p", "moe_dispatcher", "master_weights", "optimizer_moments",
                   "cross_entropy", "fp8", "gradient_dtype", "cuda_graph_scope"}),
      .schedule =
          section(top.get("schedule"), {"kind", "file", "slices", "slicing", "slice_granularity",
                                        "memory_limit_gib", "flushes"}),
      .fixed = section(costs.get("fixed"), fixed_keys()),
      .costs = costs,
  };

  Config config;
  config.source = source_;
  config.parallel = read_parallel(tree.parallel);
  config.training = read_training(tree.training);
  if (tree.schedule.has("kind")) {
    config.schedule.kind = to_enum(tree.schedule.get("kind"), config_schedule_kinds());
  }
  if (tree.schedule.has("memory_limit_gib")) {
    if (config.schedule.kind != ScheduleKind::kZbAuto) {
      const Value field = tree.schedule.get("memory_limit_gib");
      throw_error(field.key_mark, field.path, "only for schedule.kind zb-auto");
    }
    config.schedule.memory_limit_gib =
        to_number(tree.schedule.get("memory_limit_gib"), Bound::kPositive);
  }
  config.schedule.file = read_schedule_file(tree.schedule, config.schedule.kind);
  read_slicing(tree.schedule, config.schedule);
  read_int(tree.schedule, "flushes", config.schedule.flushes, 1, kMaxGlobalBatch);
  if (tree.model.present()) config.model = read_model(tree.model);
  if (tree.hardware.present()) config.hardware = read_hardware(tree.hardware);
  config.fixed = read_fixed(tree.fixed, config.parallel);
  // Only found here: the cost table reads it, so that loading stays cheap.
  if (costs.has("profile")) {
    config.profile_path =
        to_existing_file(costs.get("profile"), "the path of a cost profile (docs/cost_profile.md)");
  }
  if (costs.has("link")) {
    const Value link = costs.get("link");
    if (!link.node.IsScalar() || link.node.Scalar().empty()) {
      throw_expected(link, "the name of one of the profile's links (such as nccl)");
    }
    config.profile_link = link.node.Scalar();
  }
  if (search_ != nullptr) {
    read_search(section(top.get("search"),
                        {"pipeline", "tensor", "context", "expert", "micro_batch", "virtual_stages",
                         "schedule", "recompute", "zero_stage", "memory_cap_gib"}),
                config);
    return config;
  }
  check_cross_fields(config, tree);
  return config;
}

}  // namespace config_internal

using config_internal::Loader;
using config_internal::parse_yaml;
using config_internal::read_file;
using config_internal::ReadError;
using config_internal::valid_path;

Result<ConfigOverride> parse_override(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || !valid_path(text.substr(0, eq))) {
    return Error{fmt::format("--set {}: expected key.path=value, e.g. parallel.pipeline=8", text)};
  }
  return ConfigOverride{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

Result<std::vector<ConfigOverride>> parse_overrides(const std::vector<std::string>& flags) {
  std::vector<ConfigOverride> overrides;
  for (const std::string& flag : flags) {
    Result<ConfigOverride> o = parse_override(flag);
    if (!o) return o.error();
    overrides.push_back(std::move(*o));
  }
  return overrides;
}

Result<Config> parse_config(std::string_view yaml_text, std::string_view source,
                            const std::vector<ConfigOverride>& overrides) {
  try {
    return Loader(source, overrides).load(parse_yaml(std::string(yaml_text), std::string(source)));
  } catch (const ReadError& e) {
    return Error{e.message};
  } catch (const std::exception& e) {  // yaml-cpp's own, or allocation: never a crash
    return Error{fmt::format("{}: {}", source, e.what())};
  }
}

Result<Config> load_config(const std::string& path, const std::vector<ConfigOverride>& overrides) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const ReadError& e) {
    return Error{e.message};
  }
  return parse_config(text, path, overrides);
}

Result<Sweep> parse_sweep(std::string_view yaml_text, std::string_view source,
                          const std::vector<ConfigOverride>& overrides) {
  Sweep sweep;
  try {
    sweep.base = Loader(source, overrides, &sweep.search)
                     .load(parse_yaml(std::string(yaml_text), std::string(source)));
  } catch (const ReadError& e) {
    return Error{e.message};
  } catch (const std::exception& e) {
    return Error{fmt::format("{}: {}", source, e.what())};
  }
  return sweep;
}

Result<Sweep> load_sweep(const std::string& path, const std::vector<ConfigOverride>& overrides) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const ReadError& e) {
    return Error{e.message};
  }
  return parse_sweep(text, path, overrides);
}

std::string hardware_preset_dir() {
  const char* dir = std::getenv("PPSIM_HARDWARE_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  return PPSIM_SOURCE_DIR "/configs/hardware";
}

std::string model_preset_dir() {
  const char* dir = std::getenv("PPSIM_MODEL_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  return PPSIM_SOURCE_DIR "/configs/models";
}

std::vector<HardwarePresetNumber> hardware_preset_numbers() {
  std::vector<HardwarePresetNumber> numbers;
  for (const config_internal::HardwareNumber& number : config_internal::kHardwareNumbers) {
    numbers.push_back({number.key, number.member});
  }
  return numbers;
}

std::vector<HardwarePresetInteger> hardware_preset_integers() {
  return {{"nics_per_node", &HardwareSpec::nics_per_node}};
}

}  // namespace ppsim
