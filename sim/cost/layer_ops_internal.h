// Internal to the op lists (layer_ops.cc, moe_ops.cc): the per-GPU sizes of
// a slice, the builder that appends one phase's operations, and the pieces
// of a layer both a dense and a mixture-of-experts layer are made of.
#pragma once

#include "sim/cost/layer_ops.h"

namespace ppsim::layer_ops_internal {

// Per-GPU sizes of one slice, worked out once for all three phases.
struct Dims {
  double value_bytes;  // the dtype's
  double mask;         // bytes of a dropout mask per element (0 without dropout)
  double sequences;    // b
  double tokens;       // b l
  double norm_tokens;  // tokens whose norms and residuals this GPU computes (/t with SP)
  double hidden;
  double heads;         // attention heads on this GPU
  double qk_dim;        // per head: the width queries and keys are multiplied over
  double v_dim;         // per head: the values' (and attention output's) width
  double q_width;       // query columns on this GPU
  double k_width;       // key columns on this GPU
  double v_width;       // value columns on this GPU
  double o_width;       // attention output columns on this GPU
  double ffn;           // FFN columns on this GPU
  double head_batch;    // b x heads on this GPU: the attention products' batch
  double queries;       // l
  double keys;          // c + l
  double scores;        // score elements on this GPU: b heads l (c + l)
  double causal_pairs;  // query-key pairs a causal kernel computes, per head and sequence
  double vocab;         // vocabulary rows on this GPU
  bool bias;
  bool tensor_parallel;
  bool sequence_parallel;
  bool expert_parallel;
};

Dims dims_of(const OpShape& shape, const TokenSlice& slice);

inline Op memory_kernel(const char* name, double bytes) {
  Op op;
  op.kind = OpKind::kMemory;
  op.name = name;
  op.bytes = bytes;
  return op;
}

inline Op collective_kernel(const char* name, CollectiveKind kind, double bytes) {
  Op op;
  op.kind = OpKind::kCollective;
  op.name = name;
  op.collective = kind;
  op.bytes = bytes;
  return op;
}

// Where a linear layer's operand comes from: what writes it in FP8, and
// the sequence-parallel all-gather that brings it to the product (its
// name; nullptr: none).
struct Operand {
  Operand(Fp8Input writer, const char* gather = nullptr) : writer(writer), gather(gather) {}
  Fp8Input writer;
  const char* gather;
};

// Builds one phase: the dims and the shape's accumulation rule at hand.
class PhaseBuilder {
 public:
  PhaseBuilder(const OpShape& shape, const Dims& dims, OpList& out)
      : shape_(shape), dims_(dims), out_(out) {}

  void memory(const char* name, double bytes) { add(memory_kernel(name, bytes)); }
  // A memory-bound kernel that, with dropout, also draws a random number for
  // each of `elements` (its mask); without dropout, just the bytes.
  void dropout(const char* name, double bytes, double elements) {
    Op op = memory_kernel(name, bytes);
    if (dims_.mask > 0) op.random_draws = elements;
    add(op);
  }

  // An activation GEMM (forward, or input gradient): results in the dtype.
  void gemm(const char* name, double m, double n, double k, double batch = 1) {
    add(gemm_op(name, batch, m, n, k, dims_.value_bytes, dims_.value_bytes));
  }

  // A linear layer's activation GEMM (forward: its input times the weight;
  // input gradient: its output's gradient times the weight), in FP8 with
  // training.fp8: the (m x k) operand cast first, the weight's FP8 copy
  // made once an iteration (the optimizer step's), the result in the dtype.
  // An operand that sequence parallelism all-gathers (Operand::gather) is
  // cast by each GPU on its share and gathered in FP8, as Transformer
  // Engine does, then transposed whole for the weight gradient; with
  // current scaling the shares' maxima are all-reduced over the tensor
  // group first, so that every share is cast to one scale (Transformer
  // Engine's amax reduction of a column-parallel input and a row-parallel
  // output gradient under sequence parallelism, module/linear.py).
  void linear(const char* name, double m, double n, double k, const Operand& operand,
              double batch = 1) {
    const bool fp8 = shape_.fp8 != Fp8Recipe::kNone;
    const bool gathered =
        operand.gather != nullptr && dims_.sequence_parallel && dims_.tensor_parallel;
    if (!fp8) {
      if (operand.gather != nullptr) column_parallel_start(operand.gather);
      add(launched(gemm_op(name, batch, m, n, k, dims_.value_bytes, dims_.value_bytes), batch));
      return;
    }
    const int shares = gathered ? shape_.tensor : 1;
    if (gathered && shape_.fp8 == Fp8Recipe::kCurrent) {
      collective_op("FP8 amax all-reduce", CollectiveKind::kAllReduce, kAmaxBytes);
    }
    // A norm that writes its output in FP8 (delayed scaling) saves the
    // dtype's write; with no transpose to make there is then no cast kernel
    // at all (the saving is not credited to the norm).
    const double cast_bytes = batch * m * k *
                              fp8_operand_bytes(shape_.fp8, operand.writer, shape_.model.dtype,
                                                shares, shape_.fp8_transposes);
    if (cast_bytes > 0) add(launched(memory_kernel("FP8 cast", cast_bytes), batch));
    // Both MXFP8 copies travel (Transformer Engine's _all_gather_mxfp8
    // gathers each usage the quantizer has); one FP8 tensor otherwise.
    if (gathered) column_parallel_start(operand.gather, (mxfp8() ? 2 : 1) * fp8_value_bytes());
    Op op = gemm_op(name, batch, m, n, k, fp8_value_bytes(), dims_.value_bytes);
    op.fp8 = true;
    add(launched(op, batch));
  }

  // A weight-gradient GEMM of an (m x n) weight over the slice's tokens:
  // accumulated into the gradient buffer inside the GEMM, or written in the
  // dtype and then added to the buffer by its own kernel.
  // Returns the GEMM's index in the list.
  int weight_gemm(const char* name, double m, double n) {
    return weight_gemm(name, m, n, dims_.tokens, 1);
  }
  // `batch` weights of (m x n), each over `tokens` tokens.
  int weight_gemm(const char* name, double m, double n, double tokens, double batch) {
    return add_weight_gemm(name, m, n, tokens, batch, false);
  }
  // A linear layer's: in FP8 with training.fp8, of the transposed operands
  // its activation GEMMs' casts wrote.
  int linear_weight_gemm(const char* name, double m, double n) {
    return linear_weight_gemm(name, m, n, dims_.tokens, 1);
  }
  int linear_weight_gemm(const char* name, double m, double n, double tokens, double batch) {
    return add_weight_gemm(name, m, n, tokens, batch, shape_.fp8 != Fp8Recipe::kNone);
  }

  // The tensor-parallel collective that ends a row-parallel product (an
  // all-reduce, a reduce-scatter with sequence parallelism), or that starts
  // a column-parallel one (an all-gather with sequence parallelism; nothing
  // without). Their conjugates in backward are the same pair swapped.
  // Returns the collective's index in the list; -1 without tensor
  // parallelism. `overlap_splits`: Op::overlap_splits when it overlaps its
  // GEMM.
  int row_parallel_end(const char* name, int overlap_splits = 1) {
    if (!dims_.tensor_parallel) return -1;
    Op op = collective_kernel(
        name, dims_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
        hidden_bytes());
    op.overlaps_gemm = shape_.tp_comm_overlap;
    op.overlap_splits = overlap_splits;
    return add(op);
  }
  // A forward's row-parallel output: with tp_comm_overlap, Transformer
  // Engine's `pipeline` overlap in 4 chunks (its default num_splits, and
  // NeMo's userbuffers configs for proj_fprop and fc2_fprop, e.g.
  // NeMo-Framework-Launcher 24.07 conf/training/tp_overlap/).
  void row_parallel_output(const char* name) { row_parallel_end(name, 4); }
  void column_parallel_start(const char* name) { column_parallel_start(name, dims_.value_bytes); }
  // Of values of `value_bytes` each.
  void column_parallel_start(const char* name, double value_bytes) {
    if (!dims_.tensor_parallel || !dims_.sequence_parallel) return;
    Op op = collective_kernel(name, CollectiveKind::kAllGather,
                              dims_.tokens * dims_.hidden * value_bytes);
    op.overlaps_gemm = shape_.tp_comm_overlap;
    add(op);
  }
  void collective_op(const char* name, CollectiveKind kind, double bytes) {
    if (dims_.tensor_parallel) add(collective_kernel(name, kind, bytes));
  }
  // An all-to-all over the expert-parallel group; nothing without one.
  void all_to_all(const char* name, double bytes) {
    if (shape_.expert > 1) add(collective_kernel(name, CollectiveKind::kAllToAll, bytes));
  }
  void flash(const char* name, double flops, double bytes, bool backward) {
    Op op;
    op.kind = OpKind::kFlashAttention;
    op.name = name;
    op.flops = flops;
    op.bytes = bytes;
    op.backward = backward;
    op.keys_per_query = dims_.causal_pairs / dims_.queries;
    add(op);
  }

  // With context parallelism, `steps` = cp - 1 transfers of `bytes` to the
  // next GPU of the ring, beside the attention kernel just added; nothing
  // without.
  void ring_exchange(const char* name, double bytes) {
    context_ring(name, bytes, true, CollectiveKind::kAllGather);
  }
  // The same chunks as one collective of the context group, paid in full.
  void context_collective(const char* name, CollectiveKind kind, double bytes) {
    context_ring(name, bytes, false, kind);
  }

  // Bytes of K and V of the slice's own tokens on this GPU.
  double kv_bytes() const {
    return dims_.tokens * (dims_.k_width + dims_.v_width) * dims_.value_bytes;
  }
  // Bytes of the slice's hidden states on every GPU of the group (b l h).
  double hidden_bytes() const { return dims_.tokens * dims_.hidden * dims_.value_bytes; }
  // Bytes of the hidden states of the tokens this GPU normalizes.
  double norm_bytes() const { return norm_elements() * dims_.value_bytes; }
  double norm_elements() const { return dims_.norm_tokens * dims_.hidden; }
  // The host waits for the operation added last before it launches more
  // (Op::host_waits).
  void host_waits_for_last() { out_.at(out_.size() - 1).host_waits = true; }
  // The part of the layer (Op::graph) the operations added from now on
  // belong to; kNone: none a graph takes.
  void set_graph(CudaGraphScope part) { graph_ = part; }
  const Dims& dims() const { return dims_; }
  bool fp8() const { return shape_.fp8 != Fp8Recipe::kNone; }
  bool context_all_gather() const { return shape_.context_comm == ContextComm::kAllGather; }
  // The ring of context parallelism: cp > 1 and K, V passed GPU to GPU.
  bool has_context_ring() const { return shape_.context > 1 && !context_all_gather(); }
  int context() const { return shape_.context; }

 private:
  bool mxfp8() const { return shape_.fp8 == Fp8Recipe::kMxfp8; }
  // Bytes per value of an FP8 GEMM operand: one, with MXFP8 and its share
  // of the block's scale.
  double fp8_value_bytes() const { return mxfp8() ? kMxfp8CopyBytes : 1; }

  void context_ring(const char* name, double bytes, bool beside_attention, CollectiveKind kind) {
    if (shape_.context <= 1) return;
    Op op;
    op.kind = OpKind::kRingExchange;
    op.name = name;
    op.bytes = bytes;
    op.steps = shape_.context - 1;
    op.beside_attention = beside_attention;
    op.collective = kind;
    add(op);
  }
  static constexpr double kAmaxBytes = 4;  // one fp32 maximum a tensor

  int add_weight_gemm(const char* name, double m, double n, double tokens, double batch, bool fp8) {
    const double g = shape_.grad_bytes;
    const double operand_bytes = fp8 ? fp8_value_bytes() : dims_.value_bytes;
    const bool fused = shape_.fused_grad_accumulation;
    Op op = gemm_op(name, batch, m, n, tokens, operand_bytes, fused ? 2 * g : dims_.value_bytes);
    op.fp8 = fp8;
    const int gemm = add(launched(op, batch));
    if (!fused) {
      add(launched(
          memory_kernel("gradient accumulation", batch * m * n * (2 * g + dims_.value_bytes)),
          batch));
    }
    return gemm;
  }
  // A linear layer's kernel for each of `batch` weights (experts), each
  // launched on its own.
  static Op launched(Op op, double batch) {
    op.launches = batch;
    return op;
  }

  int add(Op op) {
    op.graph = graph_;
    return out_.add(op);
  }

  const OpShape& shape_;
  const Dims& dims_;
  OpList& out_;
  CudaGraphScope graph_ = CudaGraphScope::kNone;
};

// An MLP's columns on this GPU: its hidden units, and the up projection's
// output (the hidden units, or gate and up with SwiGLU).
struct MlpWidth {
  double ffn;
  double up;
};

MlpWidth mlp_width(const ModelSpec& model, double ffn);
// Bias, dropout and the residual add after a branch.
double residual_bytes(const PhaseBuilder& p);
// Dropout's backward (gradient and mask in, gradient out) and, with biases,
// the bias gradient's read.
double dropout_add_backward_bytes(const PhaseBuilder& p);

// The up projection, GeLU with its bias fused (read and write) or SwiGLU
// (read gate and up, write), the down projection, over `tokens` rows of
// each of `batch` MLPs (a dense one, or experts).
// `up_input`: where the up projection's input comes from (the norm before a
// dense MLP and its all-gather; a cast after the experts' permutation).
void add_mlp_core_forward(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w, double tokens,
                          const Operand& up_input, double batch = 1);
// Their input gradients: GeLU's backward reads input and gradient and writes
// one (and the bias gradient); SwiGLU's reads gate, up and gradient and
// writes two.
// `down_grad`: where the down projection's output gradient comes from.
void add_mlp_core_input_grad(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w,
                             double tokens, const Operand& down_grad, double batch = 1);

// A dense MLP of the layer's tokens, with its tensor-parallel collectives.
// The input gradient returns the index of the up projection's input-gradient
// collective (-1: none), the weight gradient that of the up projection's
// GEMM: a pair for run_beside.
void add_dense_mlp_forward(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w,
                           Fp8Input up_input);
int add_dense_mlp_input_grad(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w);
int add_dense_mlp_weight_grad(PhaseBuilder& p, const MlpWidth& w);

// The first half of a layer: the input norm, the Q, K and V projections,
// the attention core, the output projection, the residual; then the MLP's
// norm.
void add_attention_forward(PhaseBuilder& p, const ModelSpec& model);
// The second half of a layer's input gradient, after its MLP's: the MLP
// norm's backward, the residual, the attention branch and the input norm.
// Like the MLP's, the two return the index of the Q, K and V projection's
// input-gradient collective and of its weight-gradient GEMM (-1 with latent
// attention, whose projections are not paired).
int add_attention_input_grad(PhaseBuilder& p, const ModelSpec& model);
int add_attention_weight_grad(PhaseBuilder& p, const ModelSpec& model);

// With parallel.tp_backward_overlap, marks a column-parallel layer's
// input-gradient collective (index `collective` of ops.input_grad) as
// running beside its weight-gradient GEMM (index `gemm` of
// ops.weight_grad), as Megatron-LM's asynchronous column-parallel backward
// runs them (LinearWithGradAccumulationAndAsyncCommunication). Nothing when
// either is -1.
void run_beside(const OpShape& shape, int collective, int gemm, PieceOps& ops);

}  // namespace ppsim::layer_ops_internal
