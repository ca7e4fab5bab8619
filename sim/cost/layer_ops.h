// The operations one GPU runs for a piece of a stage (a transformer layer,
// the embedding, the output head and loss) on one token slice of one
// microbatch, in each phase of training: forward (F), input gradient (I) and
// weight gradient (W). Each operation is what its kernel costs: a GEMM with
// its M, N, K, a memory-bound kernel with the bytes it moves, the fused
// attention kernel with its FLOPs, or a tensor-parallel collective with its
// message. op_time.h prices them on a HardwareSpec; docs/cost_model.md lists
// every operation and where its bytes come from.
#pragma once

#include <array>
#include <cstdint>

#include "schedules/status.h"
#include "sim/core/workload.h"

namespace ppsim {

enum class OpKind {
  kGemm,            // matrix product: compute- or memory-bound (roofline)
  kMemory,          // elementwise, normalization, softmax, loss: memory-bound
  kFlashAttention,  // the fused attention kernel (forward, or backward)
  kCollective,      // a collective over the tensor- or expert-parallel group
  // Context parallelism's ring: `steps` transfers of `bytes` to the next GPU
  // of the ring, each overlapping one of the cp steps of the attention
  // kernel before it in the list (Op::beside_attention), or exposed.
  kRingExchange,
};

// kAllToAll: over the expert-parallel group (GroupLinks::expert); the others
// over the tensor-parallel group.
enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kAllToAll };

// One kernel. Sizes are doubles: a large layer's byte counts overflow 32 bits
// and products of them are formed freely.
struct Op {
  OpKind kind = OpKind::kMemory;
  const char* name = "";
  // kGemm: `batch` independent products of (m x k) by (k x n).
  double batch = 1;
  double m = 0;
  double n = 0;
  double k = 0;
  // kGemm and kFlashAttention: floating-point operations.
  double flops = 0;
  // kMemory: bytes read and written; kGemm: the operands it reads;
  // kFlashAttention: the least bytes it moves (Q, K, V in, O out);
  // kCollective: the message, as nccl-tests counts it (the buffer each GPU
  // holds; for an all-to-all, the buffer the busiest GPU receives);
  // kRingExchange: one step's transfer.
  double bytes = 0;
  // kMemory: elements that draw a random number (a dropout mask's).
  double random_draws = 0;
  // kRingExchange: transfers, one per ring step after the first (cp - 1).
  double steps = 0;
  // kRingExchange: each transfer runs beside a step of the attention kernel
  // just before it in the list (the p2p ring); else the transfers are one
  // collective of the context group (`collective`: an all-gather or a
  // reduce-scatter of the steps + 1 GPUs' chunks), paid in full.
  bool beside_attention = false;
  // kGemm: the bytes its epilogue moves: the result written, or read and
  // written when it accumulates into a buffer.
  double result_bytes = 0;
  // kGemm: a linear layer's product with FP8 operands (training.fp8), at
  // the FP8 tensor cores' peak.
  bool fp8 = false;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  bool backward = false;  // kFlashAttention: the backward kernel
  // kFlashAttention: the keys a query attends to, on average (causal: about
  // half the sequence, plus a slice's context).
  double keys_per_query = 0;
  // kCollective: runs alongside the GEMM it feeds (an all-gather: the next
  // operation) or drains (a reduce-scatter: the previous one), paying only
  // what outlasts it (parallel.tp_comm_overlap).
  bool overlaps_gemm = false;
  // kCollective with overlaps_gemm, a reduce-scatter: the chunks the GEMM
  // and the collective are cut into, the last chunk's collective running
  // after the whole GEMM (Transformer Engine's userbuffers `pipeline`
  // overlap of a forward's row-parallel output, 4 chunks); 1: one collective
  // beside the whole GEMM (its `bulk` overlap of an input gradient).
  int overlap_splits = 1;
  // kCollective of an input-gradient list: the index, in the same piece's
  // weight-gradient list, of the GEMM it runs beside when I and W run as one
  // backward (parallel.tp_backward_overlap: Megatron's asynchronous
  // column-parallel backward); -1: none.
  int weight_partner = -1;
  // The kernels the host launches for it: one, or one per local expert for
  // an expert's GEMM and its FP8 cast (Transformer Engine's GroupedLinear
  // launches each expert's own; HardwareSpec::host_launch_us each).
  double launches = 1;
  // The host waits for it to finish before it launches the next operation:
  // a device-to-host copy of the counts that size what follows (the token
  // counts of a dropless MoE layer's dispatch).
  bool host_waits = false;
  // The part of the layer a CUDA graph can take it in (CudaGraphs): a run
  // of a captured part's operations is one launch.
  CudaGraphScope graph = CudaGraphScope::kNone;
};

// A GEMM of `batch` products of (m x k) by (k x n): operands read in
// `value_bytes`, the result written in `result_bytes` per value (or read and
// written, when it accumulates into a buffer).
Op gemm_op(const char* name, double batch, double m, double n, double k, double value_bytes,
           double result_bytes);

// A phase's operations, in order, without allocating (the TeraPipe search
// prices millions of slices).
class OpList {
 public:
  static constexpr int kCapacity = 64;

  // REQUIRES: fewer than kCapacity operations so far (a mixture-of-experts
  // layer with latent attention, its experts unevenly loaded and FP8 has
  // 50 in its input gradient).
  // Returns the operation's index.
  int add(const Op& op) {
    PPSIM_CHECK(size_ < kCapacity);
    ops_[size_] = op;
    return size_++;
  }
  // REQUIRES: 0 <= i < size().
  Op& at(int i) {
    PPSIM_CHECK(i >= 0 && i < size_);
    return ops_[i];
  }
  const Op* begin() const { return ops_.data(); }
  const Op* end() const { return ops_.data() + size_; }
  int size() const { return size_; }

 private:
  std::array<Op, kCapacity> ops_{};
  int size_ = 0;
};

// A layer's token slice: `tokens` positions of each of the microbatch's
// sequences whose queries attend to the `context` positions before them and
// causally to themselves (the whole sequence: {seq_len, 0}).
struct TokenSlice {
  int64_t tokens = 0;
  int64_t context = 0;
};

// The part of each sequence one GPU computes: the whole sequence {s, 0}; or,
// with context parallelism cp, its chunks i and 2 cp - 1 - i of 2 cp, which
// are s / cp queries attending causally to s (cp - 1) / (2 cp) keys before
// them on average: the same s^2 / (2 cp) causal pairs as its two chunks.
// REQUIRES: s a multiple of 2 cp (the config loader checks it).
TokenSlice context_rank_slice(int64_t seq_len, int context);

// What shapes one GPU's kernels: the model, the micro-batch, the
// tensor-parallel degree and sequence parallelism, the context-parallel
// degree, whether the weight gradients accumulate into fp32 inside their
// GEMMs, the dtype the gradients are accumulated in, and the loss's kernels.
struct OpShape {
  ModelSpec model;
  int micro_batch = 1;
  int tensor = 1;
  int context = 1;  // cp > 1: the slice is one context rank's share
  ContextComm context_comm = ContextComm::kP2p;
  bool sequence_parallel = false;
  bool tp_comm_overlap = false;
  bool tp_backward_overlap = false;
  bool fused_grad_accumulation = true;
  int grad_bytes = 4;  // bytes per value of the accumulated gradient
  int expert = 1;      // expert-parallel degree EP of the model's MoE layers
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  CrossEntropy cross_entropy = CrossEntropy::kMegatron;
  Fp8Recipe fp8 = Fp8Recipe::kNone;
  // The architecture's FP8 GEMMs take only TN: each FP8 operand is also
  // written transposed (HardwareSpec::fp8_gemm_needs_transposes).
  bool fp8_transposes = true;

  static OpShape of(const Config& config);
};

// Bytes per value of one MXFP8 copy of a tensor: the value, and a 32nd of
// the scale byte of its block of 32 (OCP Microscaling Formats v1.0: E8M0
// scales, blocks of 32).
inline constexpr double kMxfp8CopyBytes = 1 + 1.0 / 32;

// What writes a linear layer's FP8 operand (its input forward, its output's
// gradient backward): a cast kernel of its own (Transformer Engine's
// cast-transpose), or the norm before it (TE's LayerNorm-linear modules,
// which Megatron-Core's QKV and MLP up projections are).
enum class Fp8Input { kCast, kNorm };

// Bytes moved per element of a linear layer's FP8 operand beyond what the
// model's dtype moves (docs/cost_model.md, "FP8"): a cast-transpose reads
// it (B) and writes it twice in FP8, as is and transposed for the weight
// gradient (1 + 1); with current scaling a pass reads it first for its
// maximum (B), unless a norm wrote it (the norm takes the maximum). With
// delayed scaling a norm writes its output in FP8 (1 instead of B),
// transposed later (1 read, 1 written). An operand that
// sequence parallelism gathers from `shares` GPUs is cast on each GPU's
// share and the gathered whole transposed (Transformer Engine gathers FP8).
// Without `transposes` (an architecture whose FP8 GEMMs take any layout)
// no transpose is written or made. With MXFP8 every operand is read once
// and written twice, scaled along its rows and along its columns (each
// product reads the copy scaled along its K), with or without a norm
// before it: `B + 2 kMxfp8CopyBytes`, on the share of a gathered one.
double fp8_operand_bytes(Fp8Recipe recipe, Fp8Input input, DType dtype, int shares = 1,
                         bool transposes = true);

// Bytes per value of the gradient a framework accumulates and reduces
// across the data-parallel ranks: as training.gradient_dtype says, or by
// default fp32 in bf16 training (Megatron-LM forces
// accumulate_allreduce_grads_in_fp32, megatron/training/arguments.py;
// DeepSpeed's bf16 optimizer and FSDP2 with reduce_dtype fp32 reduce in
// fp32 too) and the model's dtype otherwise.
int gradient_bytes(const TrainingSpec& training, DType dtype);

// Bytes the cross-entropy loss moves per logit, forward and backward, and
// what it holds per logit between them, the logits included
// (docs/cost_model.md, "Operations").
struct LossBytes {
  double forward = 0;
  double backward = 0;
  double held = 0;
};
LossBytes cross_entropy_bytes(CrossEntropy loss, DType dtype);

// The three phases of one piece. Recompute is not here: full recompute runs
// the forward again before I, selective the attention core's forward
// (attention_core_forward), both decided by the caller.
struct PieceOps {
  OpList forward;
  OpList input_grad;
  OpList weight_grad;
};

PieceOps layer_ops(const OpShape& shape, const TokenSlice& slice);

// How one MoE layer's routed tokens fall on the GPU that paces it: its
// experts / EP local experts, the busiest expert with min(imbalance,
// capacity_factor) times the mean tokens (a capacity drops the rest), the
// others at the mean, so that the GPU receives (local - 1 + busiest) / local
// times the mean.
struct ExpertLoad {
  double local_experts = 1;
  double busiest_expert = 1;
  double busiest_gpu = 1;
};
ExpertLoad expert_load(const MoeSpec& moe, int expert_parallel);

// Of the bytes a GPU receives in a MoE layer's dispatch or combine (a row
// per routed expert, its own included), the shares that move over NVLink
// and over the network, in an expert group of `members` GPUs, `per_node` of
// them to a node. The all-to-all dispatcher moves every row: (per_node - 1)
// / members and (members - per_node) / members. DeepEP moves a token once
// to each GPU that holds one of its experts, and across nodes once to each
// such node, relayed over NVLink there: with balanced routing, the expected
// distinct GPUs D and remote nodes R of a token's top_k experts give
// D / top_k x (per_node - 1) / per_node and R / top_k; node-limited routing
// (moe.max_nodes_per_token) caps the nodes (docs/cost_model.md, "Mixture of
// experts").
struct ExchangeShares {
  double nvlink = 0;
  double network = 0;
};
ExchangeShares exchange_shares(const MoeSpec& moe, MoeDispatcher dispatcher, int members,
                               int per_node);

// A mixture-of-experts layer (model.moe): the attention half of layer_ops,
// then the router, the permutation (not with DeepEP, whose dispatch reads
// the tokens as they are) and all-to-all dispatch of each token's top_k
// copies to its experts' GPUs (an all-gather over the tensor group
// after it), the local experts' GEMMs (those at the mean and the busiest,
// which paces the layer), the way back, and the shared experts as a dense
// MLP (docs/cost_model.md, "Mixture of experts").
// REQUIRES: shape.model.moe; sequence parallelism when shape.tensor > 1.
PieceOps moe_layer_ops(const OpShape& shape, const TokenSlice& slice);
// The forward of the attention core alone (scores, softmax, dropout, the
// product with the values; or the flash kernel): what selective recompute
// runs again.
OpList attention_core_forward(const OpShape& shape, const TokenSlice& slice);
// The word (and learned position) embedding on the first stage.
PieceOps embedding_ops(const OpShape& shape, const TokenSlice& slice);
// The final norm, the logits and the cross-entropy loss on the last stage.
PieceOps head_ops(const OpShape& shape, const TokenSlice& slice);

}  // namespace ppsim
