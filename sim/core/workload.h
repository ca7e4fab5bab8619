// The workload a user describes in YAML, as plain structs with documented
// defaults. The config loader (config.h) is the only place that sees YAML;
// everything below it takes these structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/schedule_kind.h"

namespace ppsim {

enum class DType { kBf16, kFp16, kFp32 };
enum class Recompute { kNone, kSelective, kFull };
// How iterations meet: `synchronous` all-reduces across the pipeline ranks
// before the optimizer step (gradient clipping, NaN checks), so no rank
// starts the next iteration before all have finished this one;
// `post_validation` (Qi et al. 2024) steps at once and checks afterwards.
enum class OptimizerStep { kSynchronous, kPostValidation };
// How a MoE layer's tokens reach their experts' GPUs and back: `alltoall`
// (Megatron-Core's all-to-all token dispatcher) moves one row per routed
// expert; `deepep` (DeepEP's kernels, Megatron-Core's flex dispatcher) one
// per destination GPU, and across nodes one per destination node, relayed
// over NVLink there (docs/cost_model.md, "Mixture of experts").
enum class MoeDispatcher { kAllToAll, kDeepEp };
// A part of training the framework can capture in a CUDA graph
// (Megatron-Core's cuda_graph_scope names): replayed with one launch where
// the host would launch each of its kernels (HardwareSpec::host_launch_us
// each). kNone, on an operation: no part that a graph takes.
enum class CudaGraphScope { kNone, kFullIteration, kAttention, kMlp, kMoeRouter, kMoePreprocess };

// The parts a config's CUDA graphs capture (training.cuda_graph_scope):
// kFullIteration, the whole iteration (no launch priced, OpTimer); kAttention
// (attn), each layer's attention block; kMlp, a dense layer's MLP block;
// kMoeRouter, a MoE layer's router; kMoePreprocess, the dispatch's token
// counting, no operation ppsim lists (its wait for the counts stays).
class CudaGraphs {
 public:
  void add(CudaGraphScope scope) { parts_ |= bit(scope); }
  bool has(CudaGraphScope scope) const { return (parts_ & bit(scope)) != 0; }
  // Whether an operation of `part` (Op::graph) is replayed in a graph of
  // its own part.
  bool captures(CudaGraphScope part) const;

 private:
  static unsigned bit(CudaGraphScope scope) { return 1u << static_cast<int>(scope); }

  unsigned parts_ = 0;
};
// Where the fp32 weights the optimizer updates live (docs/cost_model.md,
// "Memory"): `separate`, fp32 master weights beside the model's dtype copy,
// the gradients accumulated in fp32 in bf16 (Megatron-LM, DeepSpeed);
// `params`, the parameters themselves are fp32 and are cast to the model's
// dtype for compute, their gradients fp32 (FSDP2 with a mixed-precision
// policy, autocast); `none`, no fp32 copy: parameters and gradients in the
// model's dtype (PyTorch's optimizers on bf16 parameters).
enum class MasterWeights { kSeparate, kParams, kNone };
// The dtype of Adam's m and v: fp32, or the model's dtype (PyTorch's Adam
// keeps them in the parameters' dtype).
enum class MomentDType { kFp32, kModelDType };
// The dtype in which gradients are accumulated over the microbatches and
// reduced across the data-parallel ranks: `auto` (not a YAML value: fp32
// in bf16 training, as Megatron-LM forces, kept as master_weights says), or
// as training.gradient_dtype says (Megatron-Core's grad_reduce_in_fp32:
// false is model_dtype).
enum class GradientDType { kAuto, kFp32, kModelDType };
// The cross-entropy loss over the logits: Megatron-LM's vocabulary-parallel
// one in fp32, as eager kernels or (`megatron_fused`, cross_entropy_loss_fusion)
// as Megatron-Core's compiled ones; PyTorch's F.cross_entropy on the logits in the model's dtype
// (`torch`) or cast to fp32 first (`torch_fp32`); Transformer Engine's fused
// kernel, which Megatron-Core runs with cross_entropy_fusion_impl "te"
// (`fused`: an online softmax's one read forward, the gradient written over
// the logits backward).
enum class CrossEntropy { kMegatron, kMegatronFused, kTorch, kTorchFp32, kFused };
// The linear layers' GEMMs in FP8 (Transformer Engine's per-tensor scaling,
// docs/cost_model.md, "FP8"): `none`, in the model's dtype; `delayed`,
// scales from earlier iterations' maxima, so a kernel that writes a GEMM's
// input can write it in FP8 at once (TE's DelayedScaling, NeMo until 25.02);
// `current`, scales from the tensor's own maximum, taken by a pass of its
// own before the cast (TE's Float8CurrentScaling, NeMo from 25.04);
// `mxfp8`, block scaling (TE's MXFP8BlockScaling, Blackwell's block-scaled
// tensor cores): a power-of-two scale byte per 32 values along the
// product's K, so each operand is written twice, scaled along its rows for
// one product and along its columns for the other, and no maximum is
// reduced.
enum class Fp8Recipe { kNone, kDelayed, kCurrent, kMxfp8 };
// How a context-parallel group shares its keys and values (Transformer
// Engine's cp_comm_type): around a ring, each transfer beside a step of the
// attention kernel (`p2p`, Megatron-Core's default), or all-gathered before
// the kernel, again before its backward, and the gradients reduce-scattered
// after it, none of it overlapped (`all_gather`: Llama 3's, section 3.3.2).
enum class ContextComm { kP2p, kAllGather };
// How a token-level schedule cuts a sequence: equal slices, or TeraPipe's
// optimal cut for the model's costs.
enum class SlicingMethod { kEven, kOptimal };
// The block's parts that change its costs (docs/cost_model.md): the MLP
// (GeLU and squared ReLU: up and down matrices; SwiGLU: gate, up and down),
// the norms, the
// attention kernel (standard: scores materialized, softmax and dropout as
// their own kernels; flash: one fused kernel, FlashAttention-2 style, that
// keeps no s x s scores and recomputes them inside its backward) and the
// position encoding (learned: a table of seq_len x hidden parameters).
enum class Mlp { kGelu, kSwiglu, kSquaredRelu };
enum class Norm { kLayerNorm, kRmsNorm };
enum class Attention { kStandard, kFlash };
enum class Positions { kLearned, kRotary, kAlibi };

int dtype_bytes(DType dtype);
const char* to_string(DType dtype);
const char* to_string(Recompute recompute);
const char* to_string(OptimizerStep step);
const char* to_string(MoeDispatcher dispatcher);
const char* to_string(MasterWeights master);
const char* to_string(MomentDType moments);
const char* to_string(GradientDType gradients);
const char* to_string(CrossEntropy loss);
const char* to_string(Fp8Recipe recipe);
const char* to_string(CudaGraphScope scope);
const char* to_string(ContextComm comm);
const char* to_string(SlicingMethod slicing);
const char* to_string(Mlp mlp);
const char* to_string(Norm norm);
const char* to_string(Attention attention);
const char* to_string(Positions positions);

// A decoder-only transformer: GPT-style by default (GeLU, LayerNorm, biases,
// learned positions, tied embeddings, standard attention, dropout 0.1), a
// Llama-style one with swiglu, rmsnorm, no biases, rotary positions, untied
// embeddings, flash attention, kv_heads < heads and dropout 0.
// Mixture-of-experts layers (docs/DESIGN.md, model.moe): each replaces the
// dense MLP with a router and `experts` expert MLPs (SwiGLU or GeLU as the
// model's mlp, of expert_ffn_hidden), of which each token visits top_k, plus
// `shared_experts` that every token visits.
struct MoeSpec {
  int experts = 0;
  int top_k = 1;
  int expert_ffn_hidden = 0;
  int shared_experts = 0;
  int dense_layers = 0;        // the first N layers keep the dense MLP
  double capacity_factor = 0;  // tokens an expert takes at most, over the mean; 0: dropless
  double imbalance = 1;        // tokens on the busiest expert over the mean
  // Node-limited routing (DeepSeek-V3): each token's experts lie on at most
  // this many nodes of its expert group; 0: no limit.
  int max_nodes_per_token = 0;
};

// Multi-head latent attention (DeepSeek-V2 and V3; docs/DESIGN.md,
// model.mla): the queries through a low-rank latent of q_lora_rank (0: a
// full projection), the keys and values through one latent of kv_lora_rank
// shared by every head; each head's query-key width is qk_nope_head_dim +
// qk_rope_head_dim (the rotary part of the key shared by the heads), its
// value width v_head_dim.
struct MlaSpec {
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

struct ModelSpec {
  int layers = 0;
  int hidden = 0;
  int ffn_hidden = 0;  // 0 in YAML means 4 * hidden; the loader fills it in
  int heads = 0;
  int kv_heads = 0;  // grouped-query attention; 0 in YAML means heads; the loader fills it in
  int seq_len = 0;
  int vocab = 0;
  DType dtype = DType::kBf16;
  Mlp mlp = Mlp::kGelu;
  Norm norm = Norm::kLayerNorm;
  Attention attention = Attention::kStandard;
  Positions positions = Positions::kLearned;
  bool tie_embeddings = true;  // the output layer reuses the word embedding
  bool bias = true;            // the linear layers and norms carry biases
  double dropout = 0.1;        // attention and hidden dropout probability; 0: no dropout kernels
  std::optional<MoeSpec> moe;  // none: every layer dense
  std::optional<MlaSpec> mla;  // none: the heads' own Q, K and V projections
  // model.head_dim: each head's width when it is not hidden / heads (Qwen3:
  // 32 heads of 128 on a hidden size of 2048); 0: hidden / heads.
  int explicit_head_dim = 0;

  int head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden / heads; }
  // Per head, the width queries and keys are multiplied over, and the
  // values' (head_dim both, unless multi-head latent attention sets them).
  int qk_head_dim() const {
    return mla ? mla->qk_nope_head_dim + mla->qk_rope_head_dim : head_dim();
  }
  int v_head_dim() const { return mla ? mla->v_head_dim : head_dim(); }
  // The sizes with their defaults applied (a struct built in code may leave
  // them 0; the loader fills them in).
  int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int key_value_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  // Layers with a mixture of experts (the rest, first, are dense).
  int moe_layers() const { return moe ? layers - moe->dense_layers : 0; }
};

// One kind of accelerator and the links between them. Figures come from a
// preset in configs/hardware/ and may be overridden inline.
struct HardwareSpec {
  std::string name;
  double memory_gib = 0;        // device memory capacity
  double peak_tflops_bf16 = 0;  // dense, no sparsity
  double peak_tflops_fp16 = 0;
  double peak_tflops_fp32 = 0;  // plain fp32 (no TF32)
  double peak_tflops_fp8 = 0;   // dense; 0: no FP8 tensor cores
  // CUDA compute capability, major.minor (8.0 A100, 9.0 H100, 10.0 B200); 0:
  // not given. It decides what the architecture's FP8 GEMMs take
  // (fp8_gemm_needs_transposes).
  double compute_capability = 0;
  // GEMMs (docs/cost_model.md, "GEMMs"): a GEMM is cut into output tiles of
  // gemm_tile_m x gemm_tile_n, run in waves of sm_count tiles (0: no waves);
  // a tile costs (K + gemm_tile_k_overhead) multiply-accumulate steps at
  // max_gemm_efficiency of the peak; and it takes at least the time to move
  // its operands at the achieved memory bandwidth.
  double max_gemm_efficiency = 0.8;  // fraction of peak a tile's main loop reaches
  double sm_count = 0;
  double gemm_tile_m = 256;
  double gemm_tile_n = 128;
  double gemm_tile_k_overhead = 0;
  // The fraction of max_gemm_efficiency a tile of half the height
  // (gemm_tile_m / 2 x gemm_tile_n) reaches; cuBLAS takes it where its finer
  // waves win. 0: the one tile only.
  double gemm_half_tile_efficiency = 0;
  // FlashAttention: the fraction of peak its forward and backward reach on
  // long sequences; a kernel whose queries attend to L keys on average runs
  // at L / (L + flash_key_overhead) of it (each tile of queries pays its
  // prologue, epilogue and causal diagonal tile as that many more keys).
  double flash_forward_efficiency = 0.8;
  double flash_backward_efficiency = 0.8;
  double flash_key_overhead = 0;
  double hbm_bandwidth_gbps = 0;  // GB/s, datasheet
  double hbm_efficiency = 1;      // fraction of it that memory-bound kernels reach
  double kernel_launch_us = 0;    // the device's idle gap before each kernel
  // The host's time to launch one kernel (the framework's Python and C++,
  // the driver). Hidden while the host runs ahead of the GPU; what the GPU
  // waits for where its kernels are shorter, or after the host waited for
  // the GPU (Op::host_waits). 0: the host always runs ahead.
  double host_launch_us = 0;
  // The GPU's time per pipeline action (each F, B, I or W of a microbatch on
  // a stage) beyond its kernels: the host's framework running the
  // schedule's step (its bookkeeping, the transfers' posting and waits,
  // the first launches) while the GPU waits. A property of the framework and
  // the host as much as of the GPU; 0: none.
  double action_overhead_us = 0;
  // Dropout draws one random number (Philox) per element for its mask; the
  // kernel that draws them runs at most this many billion elements per
  // second, however few bytes it moves (0: no limit but the bytes).
  double dropout_rng_gsamples_per_s = 0;
  // The share of the SMs that communication kernels hold while they run
  // beside compute (an overlapped pair's exchange under the other action's
  // compute): that compute runs at 1 - this of its speed meanwhile.
  double comm_sm_fraction = 0;
  double intra_node_bandwidth_gbps = 0;  // GB/s per GPU per direction (NVLink)
  double intra_node_latency_us = 0;
  double inter_node_bandwidth_gbps = 0;  // GB/s of one NIC per direction
  double inter_node_latency_us = 0;
  // A pipeline's point-to-point transfer (one NCCL send/recv pair): a fixed
  // time per transfer (launch, rendezvous, the framework's synchronisation;
  // 0: the fabric's latency) and, within a node, the bandwidth one pair
  // reaches (0: the node's collective bandwidth). Across nodes it runs at
  // the sender's share of the NICs. No message-size curve: a transfer is
  // one step, not a ring of them.
  double p2p_latency_us = 0;
  double p2p_bandwidth_gbps = 0;
  // Collectives and transfers reach bus bandwidth efficiency * M / (M + half)
  // of the link for a message of M bytes (nccl-tests' busbw).
  double intra_node_collective_efficiency = 1;
  double inter_node_collective_efficiency = 1;
  double collective_half_mb = 0;  // MB (1e6 bytes) at which half the efficiency is reached
  int nics_per_node = 0;          // 0: one per GPU
  int gpus_per_node = 8;
  int nodes = 1;

  double peak_tflops(DType dtype) const;
  // Hopper's FP8 GEMMs take only the TN layout, so Transformer Engine writes
  // each per-tensor-scaled FP8 operand transposed too; from compute
  // capability 10.0 (and from 13.0; not 12.x) they take any layout and it
  // does not (TE's is_non_tn_fp8_gemm_supported). Unknown (0): transposes.
  bool fp8_gemm_needs_transposes() const;
  int num_gpus() const { return gpus_per_node * nodes; }
};

struct ParallelSpec {
  int pipeline = 1;  // p
  int tensor = 1;    // t
  int data = 1;      // d
  // cp: each sequence is split over cp GPUs (Megatron-Core's context
  // parallelism: 2 cp chunks, GPU i holding chunks i and 2 cp - 1 - i so that
  // causal attention work is even), which pass the keys and values around a
  // ring inside the attention kernel. GPUs = p t cp d.
  int context = 1;
  ContextComm context_comm = ContextComm::kP2p;  // how the cp GPUs share K and V
  // EP: each mixture-of-experts layer's experts split over EP of the d cp
  // GPUs that hold the same dense weights (Megatron-Core's expert
  // parallelism), which exchange their tokens all-to-all.
  int expert = 1;
  int virtual_stages = 1;  // v
  bool sequence_parallel = false;
  // Megatron's --tp-comm-overlap (Transformer Engine's userbuffers): each
  // tensor-parallel all-gather and reduce-scatter runs in chunks alongside
  // the GEMM it feeds or drains, so only what outlasts that GEMM is paid.
  // Needs sequence_parallel.
  bool tp_comm_overlap = false;
  // Megatron-LM's asynchronous column-parallel backward
  // (LinearWithGradAccumulationAndAsyncCommunication; --no-async-tensor-
  // model-parallel-allreduce turns it off, since 2021-09; always in
  // Megatron-Core): the input-gradient all-reduce (reduce-scatter with
  // sequence parallelism) of the Q, K and V projection, the MLP's up
  // projection and the logits runs beside the same layer's weight-gradient
  // GEMM, so a whole backward (B) pays only what outlasts that GEMM. An I
  // without its W (split-backward schedules) pays all of it.
  bool tp_backward_overlap = true;
  // Megatron-LM's scatter/gather of pipeline transfers (Narayanan et al.
  // 2021, section 4.1; --scatter-gather-tensors-in-pipeline): with t > 1
  // and no sequence parallelism, each GPU of a tensor group sends 1/t of the
  // activation (or gradient) to its peer of the next stage, and the
  // receivers all-gather the t pieces over their tensor group's link. No
  // effect with t = 1 or sequence parallelism (each GPU sends its 1/t then).
  bool p2p_scatter_gather = false;
  // Layers of each of the p * v stages, first stage first (each >= 1, summing
  // to model.layers). Empty: the default even split (layers_per_stage in
  // cost_model.h); balanced_layers (partition.h) finds the fastest one.
  std::vector<int> layers_per_stage;

  int64_t gpus() const { return int64_t{pipeline} * tensor * context * data; }
  // GPUs that hold the same weights and sum their gradients: d cp (the
  // context ranks of a sequence compute gradients of the same weights).
  int weight_replicas() const { return data * context; }
};

// Megatron-Core runs mixture-of-experts layers under tensor parallelism only
// with sequence parallelism: its token dispatchers route each tensor rank's
// share of the sequence. The config loader and the cost model both refuse
// what this names.
inline bool moe_lacks_sequence_parallel(const ModelSpec& model, const ParallelSpec& parallel) {
  return model.moe.has_value() && parallel.tensor > 1 && !parallel.sequence_parallel;
}

struct TrainingSpec {
  int global_batch = 0;  // samples per iteration (required in YAML)
  int micro_batch = 1;
  Recompute recompute = Recompute::kNone;
  int zero_stage = 0;  // 0..3
  OptimizerStep optimizer_step = OptimizerStep::kSynchronous;
  // Whether the data-parallel gradient reduction runs during the last
  // microbatch's backward (bucket by bucket) or after it (Megatron's
  // --overlap-grad-reduce).
  bool overlap_grad_reduce = false;
  // With ZeRO 1 or 2: whether the updated weights' all-gather runs during
  // the next iteration's first forward or after the optimizer step
  // (Megatron's --overlap-param-gather); the loader's default is
  // overlap_grad_reduce's value.
  bool overlap_param_gather = false;
  // Whether each weight-gradient GEMM accumulates into the gradient buffer
  // itself (Megatron's gradient_accumulation_fusion) or writes a gradient
  // that a separate kernel then adds to the buffer.
  bool grad_accumulation_fusion = true;
  // Pipeline sends block the sender until they arrive (Megatron-LM's
  // synchronous send/recv of its non-interleaved 1F1B, DeepSpeed's pipeline
  // engine); false: they overlap its compute (Megatron-Core's overlapped
  // p2p, Zero Bubble's runtime).
  bool blocking_p2p = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  MasterWeights master_weights = MasterWeights::kSeparate;
  MomentDType optimizer_moments = MomentDType::kFp32;
  GradientDType gradient_dtype = GradientDType::kAuto;
  CrossEntropy cross_entropy = CrossEntropy::kMegatron;
  Fp8Recipe fp8 = Fp8Recipe::kNone;
  CudaGraphs cuda_graphs;
};

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::k1f1b;
  std::string file;  // custom: the CSV, one row per rank (resolved path)
  // terapipe: `slices` equal token slices per microbatch, or the cut that
  // TeraPipe's dynamic program finds, in multiples of `slice_granularity`
  // tokens (0: the smallest that keeps seq_len / granularity <= 256).
  int slices = 0;
  SlicingMethod slicing = SlicingMethod::kEven;
  int slice_granularity = 0;
  // zb-auto: activation memory allowed per rank; 0: the device's memory less
  // the rank's static bytes (the tightest rank), or without hardware, what
  // 1F1B keeps on rank 0 (p microbatches).
  double memory_limit_gib = 0;
  // The iteration's microbatches run as this many passes of the schedule,
  // each a whole pipeline of m / flushes microbatches from fill to drain,
  // the optimizer stepping once after the last: gradient accumulation as
  // PyTorch's pipelining runs it (a step() per pass); 1: one pass of all m.
  int flushes = 1;
};

// Durations per stage and microbatch, for idealized studies and for
// overriding the analytic model. Each list holds one value (applies to every
// stage) or one value per stage (p * v of them). Empty means "not given".
struct FixedCosts {
  std::vector<double> forward_s;
  std::vector<double> backward_s;
  std::vector<double> weight_grad_s;  // the part of backward_s that W can take
  std::vector<double> p2p_s;          // one transfer between consecutive stages
  std::vector<double> activation_bytes;
  // The part of activation_bytes that W still reads after I (split backward);
  // when not given and there is no model, 0: I gives everything back.
  std::vector<double> weight_grad_bytes;
  // The communication inside forward_s and inside the input-gradient part of
  // backward_s that an overlapped pair's other action can hide
  // (StageCost::forward_comm, backward_comm); 0 when not given and there is
  // no model.
  std::vector<double> forward_comm_s;
  std::vector<double> backward_comm_s;
};

struct Config {
  std::string source;  // the file it came from, for messages
  std::optional<ModelSpec> model;
  std::optional<HardwareSpec> hardware;
  ParallelSpec parallel;
  TrainingSpec training;
  ScheduleSpec schedule;
  FixedCosts fixed;
  // costs.profile: a cost profile (docs/cost_profile.md) whose measured
  // kernel times replace the analytic layer times; the path as resolved by
  // the loader (relative to the config's folder), empty for none. The loader
  // checks only that the file exists; build_cost_table reads it.
  std::string profile_path;
  // costs.link: the profile's link that prices the pipeline's transfers
  // (`nccl` for a GPU per rank); empty: its "thread-copy" link, else its
  // "device-to-device" one. The loader checks only that costs.profile is
  // given; build_cost_table that the profile has the link.
  std::string profile_link;

  int num_stages() const { return parallel.pipeline * parallel.virtual_stages; }
  // DualPipe holds the model twice, one chain of stages per direction
  // (Schedule::num_chains); every other schedule once.
  int num_chains() const { return schedule.kind == ScheduleKind::kDualPipe ? 2 : 1; }
  // The stages one copy of the model is cut into: p * v / num_chains().
  // Stage s holds the layers of stage s % model_stages() of that cut.
  int model_stages() const { return num_stages() / num_chains(); }
  // Stage s takes its chain's input (the embedding) / computes its loss (the logits).
  bool first_of_chain(int s) const { return s % model_stages() == 0; }
  bool last_of_chain(int s) const { return s % model_stages() == model_stages() - 1; }
  // How model_stages() follows from the layout, for messages: `p_times_v`
  // (e.g. "p * v"), with " / 2 (DualPipe holds the model twice)" for two chains.
  std::string model_stages_formula(std::string_view p_times_v) const;
  // m = global_batch / (micro_batch * data); the loader checks divisibility.
  int num_microbatches() const {
    return training.global_batch / (training.micro_batch * parallel.data);
  }
};

// The first key under `model` whose value makes the block other than the
// GPT-3 block the profilers and the runtimes build (pre-LN LayerNorm,
// multi-head attention of hidden / heads wide heads, a GeLU MLP, biases;
// profiler/gpt_block.h): "mlp", "norm", "kv_heads", "head_dim", "bias",
// "moe" or "mla"; nullptr when the block is GPT-3's. A profile of that block
// or a run of it stands for no other (docs/cost_model.md, "costs.profile").
const char* gpt_block_misfit(const ModelSpec& model);
// What that block is made of, for the messages that refuse the others.
inline constexpr const char* kGpt3BlockParts =
    "LayerNorm, multi-head attention of hidden / heads wide heads, a GeLU MLP, biases";

// Why schedule.flushes cannot cut `config`'s iteration into passes (a kind
// whose iteration is not one generated pass, or a count that does not divide
// its microbatches), worded to follow the key; empty when it can.
std::string flushes_misfit(const Config& config);

// The `search:` section of a sweep file (`ppsim explore`): the values to try
// for each dimension. The loader fills in the defaults of an omitted key
// (pipeline and tensor: powers of two that fit the GPUs, the model and a
// node; context and expert: the base config's; micro_batch [1, 2, 4];
// virtual_stages [1, 2, 4]; schedule [1f1b,
// interleaved-1f1b, zb-h1, zb-v]; recompute [none, selective, full];
// zero_stage [0, 1]; memory_cap_gib: the device's memory less 4 GiB).
struct SearchSpace {
  std::vector<int> pipeline;
  std::vector<int> tensor;
  std::vector<int> context;  // default: the base config's
  std::vector<int> expert;   // default: the base config's
  std::vector<int> micro_batch;
  std::vector<int> virtual_stages;
  std::vector<ScheduleKind> schedule;
  std::vector<Recompute> recompute;
  std::vector<int> zero_stage;
  double memory_cap_gib = 0;
};

}  // namespace ppsim
