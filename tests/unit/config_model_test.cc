// The config contract for current dense LLMs (issue 12): the Llama-style model
// keys, model presets (configs/models/), presets given as paths, the new
// hardware figures and training.overlap_grad_reduce. Every error names
// file:line:column and the key, like config_test.cc's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config.h"

namespace ppsim {
namespace config_model_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Line 1 is `model:`: a key inserted after it is on line 2. The hardware is
// inline so that these tests do not depend on the hardware presets' figures.
constexpr std::string_view kConfig = R"(model:
  layers: 24
  hidden: 2048
  heads: 16
  seq_len: 2048
  vocab: 51200
hardware:
  memory_gib: 80
  peak_tflops_bf16: 312
  peak_tflops_fp16: 312
  peak_tflops_fp32: 19.5
  hbm_bandwidth_gbps: 2039
  intra_node_bandwidth_gbps: 300
  inter_node_bandwidth_gbps: 25
  gpus_per_node: 8
parallel:
  pipeline: 4
  tensor: 2
training:
  global_batch: 32
)";

// kConfig with `line` inserted after the line that opens `section`.
std::string with_line(std::string_view section, std::string_view line) {
  std::string text(kConfig);
  const size_t at = text.find(std::string(section) + ":\n") + section.size() + 2;
  return text.insert(at, std::string(line) + "\n");
}

// kConfig's model section replaced by `model`.
std::string with_model(std::string_view model) {
  std::string text(kConfig);
  const size_t end = text.find("hardware:");
  return text.replace(0, end, std::string(model));
}

std::string error_of(const std::string& text, const std::vector<ConfigOverride>& overrides = {}) {
  Result<Config> config = parse_config(text, "test.yaml", overrides);
  return config.ok() ? "(no error)" : config.error().message;
}

// A folder of files for one test, removed when it ends.
class TempDir {
 public:
  explicit TempDir(std::string_view name)
      : path_(std::filesystem::temp_directory_path() /
              ("ppsim_" + std::string(name) + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to `name` under the folder; returns its path.
  std::string write(const std::string& name, std::string_view text) const {
    const std::filesystem::path file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
  std::string root() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(ConfigModelTest, DefaultsAreGpt3Style) {
  Result<Config> config = parse_config(std::string(kConfig), "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const ModelSpec& model = *config->model;
  EXPECT_EQ(model.kv_heads, 16);  // = heads: multi-head attention
  EXPECT_EQ(model.mlp, Mlp::kGelu);
  EXPECT_EQ(model.norm, Norm::kLayerNorm);
  EXPECT_EQ(model.attention, Attention::kStandard);
  EXPECT_EQ(model.positions, Positions::kLearned);
  EXPECT_TRUE(model.tie_embeddings);
  EXPECT_TRUE(model.bias);
  EXPECT_DOUBLE_EQ(model.dropout, 0.1);
  EXPECT_FALSE(config->training.overlap_grad_reduce);
  EXPECT_EQ(config->hardware->nics_per_node, 0);
}

TEST(ConfigModelTest, ReadsEveryLlamaStyleKey) {
  std::string text = with_model(R"(model:
  layers: 24
  hidden: 2048
  heads: 16
  kv_heads: 4
  seq_len: 4096
  vocab: 128256
  mlp: swiglu
  norm: rmsnorm
  attention: flash
  positions: rotary
  tie_embeddings: false
  bias: false
  dropout: 0
)");
  Result<Config> config =
      parse_config(text, "test.yaml", {{"training.overlap_grad_reduce", "true"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const ModelSpec& model = *config->model;
  EXPECT_EQ(model.kv_heads, 4);
  EXPECT_EQ(model.mlp, Mlp::kSwiglu);
  EXPECT_EQ(model.norm, Norm::kRmsNorm);
  EXPECT_EQ(model.attention, Attention::kFlash);
  EXPECT_EQ(model.positions, Positions::kRotary);
  EXPECT_FALSE(model.tie_embeddings);
  EXPECT_FALSE(model.bias);
  EXPECT_DOUBLE_EQ(model.dropout, 0);
  EXPECT_TRUE(config->training.overlap_grad_reduce);
}

TEST(ConfigModelTest, KvHeadsZeroMeansHeads) {
  Result<Config> config = parse_config(with_line("model", "  kv_heads: 0"), "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->kv_heads, 16);
}

TEST(ConfigModelTest, SquaredReluMlp) {
  Result<Config> config = parse_config(with_line("model", "  mlp: squared_relu"), "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->mlp, Mlp::kSquaredRelu);
}

TEST(ConfigModelTest, AlibiPositions) {
  Result<Config> config = parse_config(with_line("model", "  positions: alibi"), "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->positions, Positions::kAlibi);
}

struct BadValue {
  std::string_view section;
  std::string_view line;
  std::string_view error;
};

// Each bad value is on line 2 of its section (model) or the line after the
// section's opening line (hardware: 8, parallel: 17, training: 20).
constexpr BadValue kBadValues[] = {
    {"model", "  kv_heads: -1",
     "test.yaml:2:13: model.kv_heads: expected an integer >= 0, got \"-1\""},
    {"model", "  kv_heads: four",
     "test.yaml:2:13: model.kv_heads: expected an integer >= 0, got \"four\""},
    {"model", "  kv_heads: 3",
     "test.yaml:2:13: model.kv_heads: expected a divisor of model.heads (16): each KV head serves "
     "a group of query heads, got \"3\""},
    {"model", "  mlp: relu",
     "test.yaml:2:8: model.mlp: expected one of gelu, swiglu, squared_relu, got \"relu\""},
    {"model", "  norm: batchnorm",
     "test.yaml:2:9: model.norm: expected one of layernorm, rmsnorm, got \"batchnorm\""},
    {"model", "  attention: sparse",
     "test.yaml:2:14: model.attention: expected one of standard, flash, got \"sparse\""},
    {"model", "  positions: sinusoidal",
     "test.yaml:2:14: model.positions: expected one of learned, rotary, alibi, got "
     "\"sinusoidal\""},
    {"model", "  tie_embeddings: sometimes",
     "test.yaml:2:19: model.tie_embeddings: expected true or false, got \"sometimes\""},
    {"model", "  bias: [true]",
     "test.yaml:2:9: model.bias: expected true or false, got \"[true]\""},
    {"model", "  dropout: 1",
     "test.yaml:2:12: model.dropout: expected a number in [0, 1), got \"1\""},
    {"model", "  dropout: -0.1",
     "test.yaml:2:12: model.dropout: expected a number in [0, 1), got \"-0.1\""},
    {"model", "  dropout: high",
     "test.yaml:2:12: model.dropout: expected a number in [0, 1), got \"high\""},
    {"model", "  preset: []",
     "test.yaml:2:11: model.preset: expected a preset's name or the path of a YAML file, got "
     "\"[]\""},
    {"training", "  overlap_grad_reduce: later",
     "test.yaml:20:24: training.overlap_grad_reduce: expected true or false, got \"later\""},
    {"training", "  blocking_p2p: sometimes",
     "test.yaml:20:17: training.blocking_p2p: expected true or false, got \"sometimes\""},
    {"training", "  moe_dispatcher: nccl",
     "test.yaml:20:19: training.moe_dispatcher: expected one of alltoall, deepep, got \"nccl\""},
    {"training", "  master_weights: fp32",
     "test.yaml:20:19: training.master_weights: expected one of separate, params, none, got "
     "\"fp32\""},
    {"training", "  optimizer_moments: bf16",
     "test.yaml:20:22: training.optimizer_moments: expected one of fp32, model_dtype, got "
     "\"bf16\""},
    {"training", "  cross_entropy: liger",
     "test.yaml:20:18: training.cross_entropy: expected one of megatron, megatron_fused, torch, "
     "torch_fp32, fused, got \"liger\""},
    {"training", "  gradient_dtype: bf16",
     "test.yaml:20:19: training.gradient_dtype: expected one of fp32, model_dtype, got \"bf16\""},
    {"parallel", "  p2p_scatter_gather: 2",
     "test.yaml:17:23: parallel.p2p_scatter_gather: expected true or false, got \"2\""},
    {"hardware", "  nics_per_node: -1",
     "test.yaml:8:18: hardware.nics_per_node: expected an integer >= 0, got \"-1\""},
    {"hardware", "  nics_per_node: 1.5",
     "test.yaml:8:18: hardware.nics_per_node: expected an integer >= 0, got \"1.5\""},
    {"hardware", "  sm_count: -1",
     "test.yaml:8:13: hardware.sm_count: expected a number >= 0, got \"-1\""},
    {"hardware", "  gemm_tile_m: 0",
     "test.yaml:8:16: hardware.gemm_tile_m: expected a positive number, got \"0\""},
    {"hardware", "  gemm_tile_n: wide",
     "test.yaml:8:16: hardware.gemm_tile_n: expected a positive number, got \"wide\""},
    {"hardware", "  gemm_tile_k_overhead: -8",
     "test.yaml:8:25: hardware.gemm_tile_k_overhead: expected a number >= 0, got \"-8\""},
    {"hardware", "  flash_forward_efficiency: 0",
     "test.yaml:8:29: hardware.flash_forward_efficiency: expected a number in (0, 1], got \"0\""},
    {"hardware", "  flash_backward_efficiency: 1.2",
     "test.yaml:8:30: hardware.flash_backward_efficiency: expected a number in (0, 1], got "
     "\"1.2\""},
    {"hardware", "  flash_key_overhead: -160",
     "test.yaml:8:23: hardware.flash_key_overhead: expected a number >= 0, got \"-160\""},
    {"hardware", "  flash_key_overhead: 1e6",
     "test.yaml:8:23: hardware.flash_key_overhead: expected 0 to 100000 keys (is it in another "
     "unit?), got \"1e6\""},
    {"hardware", "  hbm_efficiency: 95",
     "test.yaml:8:19: hardware.hbm_efficiency: expected a number in (0, 1], got \"95\""},
    {"hardware", "  gemm_half_tile_efficiency: -0.5",
     "test.yaml:8:30: hardware.gemm_half_tile_efficiency: expected a number >= 0, got \"-0.5\""},
    {"hardware", "  gemm_half_tile_efficiency: 85",
     "test.yaml:8:30: hardware.gemm_half_tile_efficiency: expected 0 to 1 of max_gemm_efficiency "
     "(is it in another unit?), got \"85\""},
    {"hardware", "  kernel_launch_us: -2",
     "test.yaml:8:21: hardware.kernel_launch_us: expected a number >= 0, got \"-2\""},
    {"hardware", "  action_overhead_us: -0.5",
     "test.yaml:8:23: hardware.action_overhead_us: expected a number >= 0, got \"-0.5\""},
    {"hardware", "  host_launch_us: -3",
     "test.yaml:8:19: hardware.host_launch_us: expected a number >= 0, got \"-3\""},
    {"hardware", "  dropout_rng_gsamples_per_s: -1",
     "test.yaml:8:31: hardware.dropout_rng_gsamples_per_s: expected a number >= 0, got \"-1\""},
    {"hardware", "  comm_sm_fraction: 1",
     "test.yaml:8:21: hardware.comm_sm_fraction: expected a number in [0, 1), got \"1\""},
    {"hardware", "  p2p_latency_us: -1",
     "test.yaml:8:19: hardware.p2p_latency_us: expected a number >= 0, got \"-1\""},
    {"hardware", "  p2p_bandwidth_gbps: x",
     "test.yaml:8:23: hardware.p2p_bandwidth_gbps: expected a number >= 0, got \"x\""},
    {"hardware", "  intra_node_collective_efficiency: 0",
     "test.yaml:8:37: hardware.intra_node_collective_efficiency: expected a number in (0, 1], got "
     "\"0\""},
    {"hardware", "  inter_node_collective_efficiency: 2",
     "test.yaml:8:37: hardware.inter_node_collective_efficiency: expected a number in (0, 1], got "
     "\"2\""},
    {"hardware", "  collective_half_mb: -1",
     "test.yaml:8:23: hardware.collective_half_mb: expected a number >= 0, got \"-1\""},
};

TEST(ConfigModelTest, BadValuesNameTheirPlaceAndKey) {
  for (const BadValue& bad : kBadValues) {
    EXPECT_EQ(error_of(with_line(bad.section, bad.line)), bad.error) << bad.line;
  }
}

TEST(ConfigModelTest, GemmHalfEfficiencyIsGone) {
  EXPECT_THAT(error_of(with_line("hardware", "  gemm_half_efficiency_gflop: 2")),
              StartsWith("test.yaml:8:3: hardware.gemm_half_efficiency_gflop: unknown key, "
                         "expected one of preset, gpus_per_node, nodes, name, memory_gib, "));
}

TEST(ConfigModelTest, NewHardwareFiguresAreRead) {
  std::string text = with_line("hardware",
                               "  sm_count: 132\n  gemm_tile_m: 128\n  gemm_tile_n: 256\n"
                               "  gemm_tile_k_overhead: 64\n  flash_forward_efficiency: 0.7\n"
                               "  flash_backward_efficiency: 0.6\n  hbm_efficiency: 0.9\n"
                               "  kernel_launch_us: 4\n  action_overhead_us: 890\n"
                               "  intra_node_collective_efficiency: 0.8\n"
                               "  inter_node_collective_efficiency: 0.75\n"
                               "  collective_half_mb: 16\n  nics_per_node: 4");
  Result<Config> config = parse_config(text, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const HardwareSpec& hw = *config->hardware;
  EXPECT_DOUBLE_EQ(hw.sm_count, 132);
  EXPECT_DOUBLE_EQ(hw.gemm_tile_m, 128);
  EXPECT_DOUBLE_EQ(hw.gemm_tile_n, 256);
  EXPECT_DOUBLE_EQ(hw.gemm_tile_k_overhead, 64);
  EXPECT_DOUBLE_EQ(hw.flash_forward_efficiency, 0.7);
  EXPECT_DOUBLE_EQ(hw.flash_backward_efficiency, 0.6);
  EXPECT_DOUBLE_EQ(hw.hbm_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(hw.kernel_launch_us, 4);
  EXPECT_DOUBLE_EQ(hw.action_overhead_us, 890);
  EXPECT_DOUBLE_EQ(hw.intra_node_collective_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(hw.inter_node_collective_efficiency, 0.75);
  EXPECT_DOUBLE_EQ(hw.collective_half_mb, 16);
  EXPECT_EQ(hw.nics_per_node, 4);
}

// Megatron-LM splits KV heads over the tensor ranks, or replicates them when
// there are more ranks than KV heads: either way one divides the other.
TEST(ConfigModelTest, KvHeadsAndTensorParallelism) {
  std::string fewer = with_line("model", "  kv_heads: 1");  // t = 2 ranks share one KV head
  EXPECT_EQ(error_of(fewer), "(no error)");
  std::string text = with_model(R"(model:
  layers: 24
  hidden: 1536
  heads: 24
  kv_heads: 6
  seq_len: 2048
  vocab: 51200
)");
  EXPECT_EQ(error_of(text, {{"parallel.tensor", "4"}, {"parallel.pipeline", "2"}}),
            "test.yaml:5:13: model.kv_heads: expected a multiple or a divisor of parallel.tensor "
            "(4), got \"6\"");
  EXPECT_EQ(error_of(text, {{"parallel.tensor", "2"}, {"parallel.pipeline", "4"}}), "(no error)");
}

TEST(ConfigModelTest, TensorCommOverlapNeedsSequenceParallelism) {
  // The overlapped collectives are sequence parallelism's all-gathers and
  // reduce-scatters: without it the key would mean nothing.
  const std::string text = with_line("parallel", "  tp_comm_overlap: true");
  EXPECT_THAT(error_of(text), testing::HasSubstr("parallel.tp_comm_overlap: needs "
                                                 "parallel.sequence_parallel"));
  EXPECT_EQ(error_of(text, {{"parallel.sequence_parallel", "true"}}), "(no error)");
}

// FP8 needs tensor cores that run it (the A100 has none), a 16-bit model
// and the analytic model; each refusal names the key and the reason.
TEST(ConfigModelTest, Fp8NeedsFp8TensorCores) {
  const std::string text = with_line("training", "  fp8: delayed");
  EXPECT_EQ(error_of(text),
            "test.yaml:20:8: training.fp8: delayed needs hardware.peak_tflops_fp8: hardware "
            "custom gives none (a GPU without FP8 tensor cores, as the A100)");
  EXPECT_EQ(error_of(text, {{"hardware.peak_tflops_fp8", "1979"}}), "(no error)");
  EXPECT_EQ(error_of(text, {{"hardware.peak_tflops_fp8", "1979"}, {"model.dtype", "fp32"}}),
            "test.yaml:20:8: training.fp8: delayed needs model.dtype bf16 or fp16: FP8 casts a "
            "16-bit model's linear layers");
  EXPECT_EQ(error_of(with_line("training", "  fp8: e4m3")),
            "test.yaml:20:8: training.fp8: expected one of none, delayed, current, mxfp8, got "
            "\"e4m3\"");
  EXPECT_EQ(error_of(with_line("training", "  fp8: none")), "(no error)");
}

// MXFP8 needs Blackwell's block-scaled tensor cores: compute capability 10.0
// on, as Transformer Engine checks it; a preset that gives none (0) is
// refused too.
TEST(ConfigModelTest, Mxfp8NeedsBlockScaledTensorCores) {
  const std::string text = with_line("training", "  fp8: mxfp8");
  const std::vector<ConfigOverride> hopper = {{"hardware.peak_tflops_fp8", "1979"},
                                              {"hardware.compute_capability", "9.0"}};
  EXPECT_EQ(error_of(text, hopper),
            "test.yaml:20:8: training.fp8: mxfp8 needs hardware.compute_capability 10.0 or more "
            "(Blackwell's block-scaled tensor cores; Transformer Engine refuses MXFP8 below): "
            "hardware custom gives 9");
  EXPECT_EQ(error_of(text, {{"hardware.peak_tflops_fp8", "4500"}}),
            "test.yaml:20:8: training.fp8: mxfp8 needs hardware.compute_capability 10.0 or more "
            "(Blackwell's block-scaled tensor cores; Transformer Engine refuses MXFP8 below): "
            "hardware custom gives 0");
  EXPECT_EQ(error_of(text, {{"hardware.peak_tflops_fp8", "4500"},
                            {"hardware.compute_capability", "10.0"}}),
            "(no error)");
}

// A whole-iteration CUDA graph replays fixed shapes: a dropless MoE layer's
// change every step.
TEST(ConfigModelTest, AWholeIterationGraphNeedsFixedExpertShapes) {
  const std::string dense = with_line("training", "  cuda_graph_scope: full_iteration");
  std::string text = with_model("model:\n  preset: mixtral-8x7b\n  seq_len: 2048\n");
  text.insert(text.find("training:\n") + 10, "  cuda_graph_scope: full_iteration\n");
  const std::vector<ConfigOverride> sp = {{"parallel.sequence_parallel", "true"}};
  EXPECT_EQ(error_of(text, sp),
            "test.yaml:17:21: training.cuda_graph_scope: full_iteration needs fixed shapes: "
            "model.moe is dropless (no capacity_factor), so its token counts change every "
            "step; give the experts a capacity");
  std::vector<ConfigOverride> capacity = sp;
  capacity.push_back({"model.moe.capacity_factor", "1"});
  EXPECT_EQ(error_of(text, capacity), "(no error)");
  EXPECT_EQ(error_of(dense), "(no error)");
}

// Megatron-Core's scope names, one or a list; `moe`, a whole MoE block, is
// not modelled.
TEST(ConfigModelTest, CudaGraphScopesAreOneOrAList) {
  Result<Config> listed = parse_config(
      with_line("training", "  cuda_graph_scope: [attn, moe_router, moe_preprocess]"), "test.yaml");
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  EXPECT_TRUE(listed->training.cuda_graphs.has(CudaGraphScope::kAttention));
  EXPECT_TRUE(listed->training.cuda_graphs.has(CudaGraphScope::kMoeRouter));
  EXPECT_TRUE(listed->training.cuda_graphs.has(CudaGraphScope::kMoePreprocess));
  EXPECT_FALSE(listed->training.cuda_graphs.has(CudaGraphScope::kMlp));
  EXPECT_FALSE(listed->training.cuda_graphs.has(CudaGraphScope::kFullIteration));
  Result<Config> one = parse_config(with_line("training", "  cuda_graph_scope: mlp"), "test.yaml");
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_TRUE(one->training.cuda_graphs.has(CudaGraphScope::kMlp));
  EXPECT_EQ(error_of(with_line("training", "  cuda_graph_scope: [attn, moe]")),
            "test.yaml:20:28: training.cuda_graph_scope[1]: expected one of none, "
            "full_iteration, attn, mlp, moe_router, moe_preprocess, got \"moe\"");
  EXPECT_EQ(error_of(with_line("training", "  cuda_graph_scope: [none, attn]")),
            "test.yaml:20:22: training.cuda_graph_scope[0]: none cannot be listed with other "
            "scopes");
  EXPECT_THAT(error_of(with_line("training", "  cuda_graph_scope: []")),
              HasSubstr("training.cuda_graph_scope: expected a scope or a list of scopes"));
}

// training.overlap_param_gather follows overlap_grad_reduce unless given.
TEST(ConfigModelTest, ParamGatherOverlapsAsTheReductionUnlessSaid) {
  Result<Config> plain = parse_config(with_line("training", "  zero_stage: 1"), "test.yaml");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_FALSE(plain->training.overlap_param_gather);
  Result<Config> both =
      parse_config(with_line("training", "  overlap_grad_reduce: true"), "test.yaml");
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_TRUE(both->training.overlap_param_gather);
  Result<Config> reduce_only =
      parse_config(with_line("training", "  overlap_grad_reduce: true"), "test.yaml",
                   {{"training.overlap_param_gather", "false"}});
  ASSERT_TRUE(reduce_only.ok()) << reduce_only.error().message;
  EXPECT_TRUE(reduce_only->training.overlap_grad_reduce);
  EXPECT_FALSE(reduce_only->training.overlap_param_gather);
  EXPECT_EQ(error_of(with_line("training", "  overlap_param_gather: soon")),
            "test.yaml:20:25: training.overlap_param_gather: expected true or false, got \"soon\"");
}

constexpr std::string_view kPresetConfig = R"(model:
  preset: llama3-8b
hardware:
  memory_gib: 80
  peak_tflops_bf16: 989
  peak_tflops_fp16: 989
  peak_tflops_fp32: 67
  hbm_bandwidth_gbps: 3350
  intra_node_bandwidth_gbps: 450
  inter_node_bandwidth_gbps: 50
  gpus_per_node: 8
parallel:
  pipeline: 8
training:
  global_batch: 16
)";

TEST(ConfigModelPresetTest, ConfigKeysOverrideThePresets) {
  std::string text(kPresetConfig);
  text.insert(text.find("hardware:"), "  seq_len: 4096\n  layers: 16\n  dropout: 0.05\n");
  Result<Config> config = parse_config(text, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const ModelSpec& model = *config->model;
  EXPECT_EQ(model.seq_len, 4096);
  EXPECT_EQ(model.layers, 16);
  EXPECT_DOUBLE_EQ(model.dropout, 0.05);
  EXPECT_EQ(model.hidden, 4096);  // the preset's
  EXPECT_EQ(model.kv_heads, 8);
  EXPECT_EQ(model.mlp, Mlp::kSwiglu);
}

// A config's model.moe (or a --set flag under it) gives some keys of the
// preset's map, which keeps the others: Mixtral's preset has 8 experts, top
// 2, of 14336 (configs/models/mixtral-8x7b.yaml) and no imbalance (1).
TEST(ConfigModelPresetTest, ANestedMapKeepsThePresetsOtherKeys) {
  std::string text(kPresetConfig);
  text.replace(text.find("llama3-8b"), 9, "mixtral-8x7b\n  moe: {imbalance: 1.5}");
  for (const auto& [yaml, sets, imbalance] :
       {std::tuple{text, std::vector<ConfigOverride>{}, 1.5},
        std::tuple{text, std::vector<ConfigOverride>{{"model.moe.imbalance", "2"}}, 2.0}}) {
    Result<Config> config = parse_config(yaml, "test.yaml", sets);
    ASSERT_TRUE(config.ok()) << config.error().message;
    ASSERT_TRUE(config->model->moe.has_value());
    const MoeSpec& moe = *config->model->moe;
    EXPECT_EQ(moe.experts, 8);
    EXPECT_EQ(moe.top_k, 2);
    EXPECT_EQ(moe.expert_ffn_hidden, 14336);
    EXPECT_DOUBLE_EQ(moe.imbalance, imbalance);
  }
  // Node-limited routing: none in Mixtral's preset; at most its 8 experts'
  // nodes.
  EXPECT_EQ(parse_config(text, "test.yaml", {})->model->moe->max_nodes_per_token, 0);
  EXPECT_EQ(parse_config(text, "test.yaml", {{"model.moe.max_nodes_per_token", "2"}})
                ->model->moe->max_nodes_per_token,
            2);
  EXPECT_EQ(
      parse_config(text, "test.yaml", {{"model.moe.max_nodes_per_token", "9"}}).error().message,
      "--set model.moe.max_nodes_per_token=9: model.moe.max_nodes_per_token: expected an "
      "integer from 0 to 8, got \"9\"");
  // A key the preset's map has not is still refused, named in the config.
  std::string bad = text;
  bad.replace(bad.find("imbalance: 1.5"), 14, "imbalence: 1.5");
  EXPECT_THAT(error_of(bad), testing::HasSubstr("test.yaml:3:"));
  EXPECT_THAT(error_of(bad), testing::HasSubstr("model.moe.imbalence: unknown key"));
}

TEST(ConfigModelPresetTest, SetNamesAPreset) {
  std::string text(kPresetConfig);
  text.erase(0, text.find("hardware:"));
  Result<Config> config = parse_config(text, "test.yaml", {{"model.preset", "llama2-70b"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->layers, 80);
  EXPECT_EQ(config->model->kv_heads, 8);
}

TEST(ConfigModelPresetTest, UnknownPresetListsTheShippedOnes) {
  std::string text(kPresetConfig);
  text.replace(text.find("llama3-8b"), 9, "gpt5");
  std::string error = error_of(text);
  EXPECT_THAT(error, StartsWith("test.yaml:2:11: model.preset: expected one of the presets in "));
  EXPECT_THAT(
      error,
      HasSubstr("(or a YAML file's path): deepseek-v3, gpt3-175b, kimi-k2, llama2-70b, llama2-7b, "
                "llama3-405b, llama3-70b, llama3-8b, mixtral-8x7b, nemotron4-340b, qwen3-30b-a3b, "
                "got "
                "\"gpt5\""));
}

TEST(ConfigModelPresetTest, PresetPathIsRelativeToTheConfig) {
  TempDir dir("preset_path_relative");
  dir.write("models/tiny.yaml",
            "layers: 8\nhidden: 512\nheads: 8\nkv_heads: 2\n"
            "seq_len: 1024\nvocab: 1000\nmlp: swiglu\n");
  dir.write("gpus/box.yaml",
            "memory_gib: 16\npeak_tflops_bf16: 100\npeak_tflops_fp16: 100\n"
            "peak_tflops_fp32: 10\nhbm_bandwidth_gbps: 900\nintra_node_bandwidth_gbps: 100\n"
            "inter_node_bandwidth_gbps: 10\nnics_per_node: 1\n");
  const std::string path = dir.write("configs/run.yaml", R"(model: {preset: ../models/tiny.yaml}
hardware: {preset: ../gpus/box.yaml, gpus_per_node: 2}
parallel: {pipeline: 2}
training: {global_batch: 4}
)");
  Result<Config> config = load_config(path);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->layers, 8);
  EXPECT_EQ(config->model->kv_heads, 2);
  EXPECT_EQ(config->model->ffn_hidden, 4 * 512);
  EXPECT_EQ(config->model->mlp, Mlp::kSwiglu);
  EXPECT_EQ(config->hardware->name, "box");
  EXPECT_DOUBLE_EQ(config->hardware->memory_gib, 16);
  EXPECT_EQ(config->hardware->nics_per_node, 1);
}

TEST(ConfigModelPresetTest, MissingPresetPathNamesTheResolvedPath) {
  TempDir dir("preset_path_missing");
  const std::string path = dir.write("run.yaml", R"(model:
  preset: models/none.yaml
hardware:
  preset: /no/such/gpu.yaml
)");
  const std::string resolved = dir.root() + "/models/none.yaml";
  Result<Config> model = load_config(path);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().message, path + ":2:11: model.preset: no such preset file: " + resolved +
                                       ", got \"models/none.yaml\"");
  Result<Config> hardware = load_config(path, {{"model.preset", "llama2-7b"}});
  ASSERT_FALSE(hardware.ok());
  EXPECT_EQ(hardware.error().message,
            path +
                ":4:11: hardware.preset: no such preset file: /no/such/gpu.yaml, got "
                "\"/no/such/gpu.yaml\"");
}

// With --set, a relative path is the working directory's, where the command
// was typed.
TEST(ConfigModelPresetTest, PresetPathFromSetIsRelativeToTheWorkingDirectory) {
  EXPECT_EQ(error_of(std::string(kPresetConfig), {{"model.preset", "mine.yaml"}}),
            "--set model.preset=mine.yaml: model.preset: no such preset file: mine.yaml, got "
            "\"mine.yaml\"");
}

TEST(ConfigModelPresetTest, ErrorsInAPresetNameThePresetFile) {
  TempDir dir("preset_errors");
  const std::string bad = dir.write("bad.yaml",
                                    "layers: 32\nhidden: 4096\nheads: 32\n"
                                    "kv_heads: 5\nseq_len: 4096\nvocab: 32000\n");
  const std::string nested = dir.write("nested.yaml", "preset: llama2-7b\n");
  const std::string broken = dir.write("broken.yaml",
                                       "layers: 32\nhidden: 4096\nheads: 32\n"
                                       "seq_len: 4096\nvocab: 32000\n"
                                       "norm: groupnorm\n");
  EXPECT_EQ(error_of(std::string(kPresetConfig), {{"model.preset", bad}}),
            bad +
                ":4:11: model.kv_heads: expected a divisor of model.heads (32): each KV head "
                "serves a group of query heads, got \"5\"");
  EXPECT_THAT(error_of(std::string(kPresetConfig), {{"model.preset", nested}}),
              StartsWith(nested + ":1:1: model.preset: unknown key, expected one of layers, "));
  EXPECT_EQ(error_of(std::string(kPresetConfig), {{"model.preset", broken}}),
            broken + ":6:7: model.norm: expected one of layernorm, rmsnorm, got \"groupnorm\"");
}

// A required key that neither the config nor its preset gives names the
// config's section.
TEST(ConfigModelPresetTest, MissingRequiredKeyNamesTheConfig) {
  TempDir dir("preset_incomplete");
  const std::string partial = dir.write("partial.yaml", "hidden: 4096\nheads: 32\n");
  EXPECT_EQ(error_of(std::string(kPresetConfig), {{"model.preset", partial}}),
            "test.yaml:1:1: model.layers: expected an integer from 1 to 16384, got nothing");
}

TEST(ConfigModelPresetTest, PresetDirectoryFromEnvironment) {
  TempDir dir("preset_dir_env");
  dir.write("mini.yaml", "layers: 8\nhidden: 256\nheads: 4\nseq_len: 128\nvocab: 100\n");
  setenv("PPSIM_MODEL_DIR", dir.root().c_str(), 1);
  const std::string found = model_preset_dir();
  Result<Config> config =
      parse_config(std::string(kPresetConfig), "test.yaml", {{"model.preset", "mini"}});
  unsetenv("PPSIM_MODEL_DIR");
  EXPECT_EQ(found, dir.root());
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->hidden, 256);
}

// The documented shape of each shipped preset (the sources are in each file).
struct Shipped {
  std::string_view name;
  int layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len;
};

constexpr Shipped kShipped[] = {
    {"gpt3-175b", 96, 12288, 96, 96, 49152, 50257, 2048},
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096},
    {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192},
};

class ShippedModelPresetTest : public ::testing::TestWithParam<Shipped> {};

TEST_P(ShippedModelPresetTest, LoadsWithItsDocumentedShape) {
  const Shipped& preset = GetParam();
  Result<Config> config = parse_config(std::string(kPresetConfig), "test.yaml",
                                       {{"model.preset", std::string(preset.name)}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const ModelSpec& model = *config->model;
  EXPECT_EQ(model.layers, preset.layers);
  EXPECT_EQ(model.hidden, preset.hidden);
  EXPECT_EQ(model.heads, preset.heads);
  EXPECT_EQ(model.kv_heads, preset.kv_heads);
  EXPECT_EQ(model.ffn_hidden, preset.ffn_hidden);
  EXPECT_EQ(model.vocab, preset.vocab);
  EXPECT_EQ(model.seq_len, preset.seq_len);
  EXPECT_EQ(model.dtype, DType::kBf16);
  const bool llama = preset.name.starts_with("llama");
  EXPECT_EQ(model.mlp, llama ? Mlp::kSwiglu : Mlp::kGelu);
  EXPECT_EQ(model.norm, llama ? Norm::kRmsNorm : Norm::kLayerNorm);
  EXPECT_EQ(model.attention, llama ? Attention::kFlash : Attention::kStandard);
  EXPECT_EQ(model.positions, llama ? Positions::kRotary : Positions::kLearned);
  EXPECT_EQ(model.tie_embeddings, !llama);
  EXPECT_EQ(model.bias, !llama);
  EXPECT_DOUBLE_EQ(model.dropout, llama ? 0.0 : 0.1);
}

INSTANTIATE_TEST_SUITE_P(Shipped, ShippedModelPresetTest, ::testing::ValuesIn(kShipped),
                         [](const ::testing::TestParamInfo<Shipped>& info) {
                           std::string name(info.param.name);
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace config_model_test
}  // namespace ppsim
