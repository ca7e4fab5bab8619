// The kernels of a transformer layer, the embedding and the head, phase by
// phase, as Megatron-LM runs them (docs/cost_model.md, "Operations"): the
// byte counts follow the kernels' reads and writes, in the model's dtype
// unless said otherwise.
#include "sim/cost/layer_ops.h"

#include <algorithm>

namespace ppsim {
namespace {

// PyTorch's dropout (native_dropout) keeps a one-byte mask per element.
constexpr double kMaskBytes = 1;
// Megatron's vocabulary-parallel cross-entropy casts the logits to fp32 (2
// read, 4 written), takes the maximum (4), subtracts it (4 + 4), exponentiates
// (4 + 4), sums (4) and normalizes (4 + 4) in place: 38 bytes per logit
// forward; its backward scales the saved softmax (4 + 4) and casts the
// gradient back (4 + 2): 14 (megatron/core/tensor_parallel/cross_entropy.py).
constexpr double kLossForwardBytesPerLogit = 38;
constexpr double kLossBackwardBytesPerLogit = 14;
// The loss's own all-reduces over the tensor group (maximum, target logit,
// sum of exponentials), one fp32 value per token each.
constexpr int kLossAllReduces = 3;
constexpr double kLossAllReduceBytesPerToken = 4;

// Per-GPU sizes of one slice, worked out once for all three phases.
struct Dims {
  double value_bytes;  // the dtype's
  double mask;         // bytes of a dropout mask per element (0 without dropout)
  double sequences;    // b
  double tokens;       // b l
  double norm_tokens;  // tokens whose norms and residuals this GPU computes (/t with SP)
  double hidden;
  double q_width;       // query (and attention output) columns on this GPU
  double kv_width;      // key (and value) columns on this GPU
  double ffn;           // FFN columns on this GPU
  double up_width;      // the up projection's output: ffn, or gate and up (SwiGLU)
  double head_batch;    // b x heads on this GPU: the attention products' batch
  double queries;       // l
  double keys;          // c + l
  double scores;        // score elements on this GPU: b heads l (c + l)
  double causal_pairs;  // query-key pairs a causal kernel computes, per head and sequence
  double vocab;         // vocabulary rows on this GPU
  bool bias;
  bool tensor_parallel;
  bool sequence_parallel;
};

Dims dims_of(const OpShape& shape, const TokenSlice& slice) {
  const ModelSpec& model = shape.model;
  const double t = shape.tensor;
  const double b = shape.micro_batch;
  const double l = static_cast<double>(slice.tokens);
  const double c = static_cast<double>(slice.context);
  const double d = model.head_dim();
  const double heads = model.heads / t;
  // Megatron replicates key-value heads when there are fewer than t.
  const double kv_heads = std::max(1.0, model.key_value_heads() / t);
  const double ffn = model.ffn() / t;
  Dims dims{};
  dims.value_bytes = dtype_bytes(model.dtype);
  dims.mask = model.dropout > 0 ? kMaskBytes : 0;
  dims.sequences = b;
  dims.tokens = b * l;
  dims.norm_tokens = shape.sequence_parallel ? b * l / t : b * l;
  dims.hidden = model.hidden;
  dims.q_width = heads * d;
  dims.kv_width = kv_heads * d;
  dims.ffn = ffn;
  dims.up_width = model.mlp == Mlp::kSwiglu ? 2 * ffn : ffn;
  dims.head_batch = b * heads;
  dims.queries = l;
  dims.keys = c + l;
  dims.scores = b * heads * l * (c + l);
  dims.causal_pairs = l * c + l * l / 2;
  dims.vocab = model.vocab / t;
  dims.bias = model.bias;
  dims.tensor_parallel = shape.tensor > 1;
  dims.sequence_parallel = shape.sequence_parallel;
  return dims;
}

Op memory(const char* name, double bytes) {
  Op op;
  op.kind = OpKind::kMemory;
  op.name = name;
  op.bytes = bytes;
  return op;
}

Op collective(const char* name, CollectiveKind kind, double bytes) {
  Op op;
  op.kind = OpKind::kCollective;
  op.name = name;
  op.collective = kind;
  op.bytes = bytes;
  return op;
}

// Builds one phase: the dims and the shape's accumulation rule at hand.
class PhaseBuilder {
 public:
  PhaseBuilder(const OpShape& shape, const Dims& dims, OpList& out)
      : shape_(shape), dims_(dims), out_(out) {}

  void memory(const char* name, double bytes) { out_.add(ppsim::memory(name, bytes)); }

  // An activation GEMM (forward, or input gradient): results in the dtype.
  void gemm(const char* name, double m, double n, double k, double batch = 1) {
    out_.add(gemm_op(name, batch, m, n, k, dims_.value_bytes, dims_.value_bytes));
  }

  // A weight-gradient GEMM of an (m x n) weight over the slice's tokens:
  // accumulated into the gradient buffer inside the GEMM, or written in the
  // dtype and then added to the buffer by its own kernel.
  void weight_gemm(const char* name, double m, double n) {
    const double g = shape_.grad_bytes;
    if (shape_.fused_grad_accumulation) {
      out_.add(gemm_op(name, 1, m, n, dims_.tokens, dims_.value_bytes, 2 * g));
      return;
    }
    out_.add(gemm_op(name, 1, m, n, dims_.tokens, dims_.value_bytes, dims_.value_bytes));
    memory("gradient accumulation", m * n * (2 * g + dims_.value_bytes));
  }

  // The tensor-parallel collective that ends a row-parallel product (an
  // all-reduce, a reduce-scatter with sequence parallelism), or that starts
  // a column-parallel one (an all-gather with sequence parallelism; nothing
  // without). Their conjugates in backward are the same pair swapped.
  void row_parallel_end(const char* name) {
    if (!dims_.tensor_parallel) return;
    Op op = collective(
        name, dims_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
        hidden_bytes());
    op.overlaps_gemm = shape_.tp_comm_overlap;
    out_.add(op);
  }
  void column_parallel_start(const char* name) {
    if (!dims_.tensor_parallel || !dims_.sequence_parallel) return;
    Op op = collective(name, CollectiveKind::kAllGather, hidden_bytes());
    op.overlaps_gemm = shape_.tp_comm_overlap;
    out_.add(op);
  }
  void collective_op(const char* name, CollectiveKind kind, double bytes) {
    if (dims_.tensor_parallel) out_.add(collective(name, kind, bytes));
  }
  void flash(const char* name, double flops, double bytes, bool backward) {
    Op op;
    op.kind = OpKind::kFlashAttention;
    op.name = name;
    op.flops = flops;
    op.bytes = bytes;
    op.backward = backward;
    out_.add(op);
  }

  // With context parallelism, `steps` = cp - 1 transfers of `bytes` to the
  // next GPU of the ring; nothing without.
  void ring_exchange(const char* name, double bytes) {
    if (shape_.context <= 1) return;
    Op op;
    op.kind = OpKind::kRingExchange;
    op.name = name;
    op.bytes = bytes;
    op.steps = shape_.context - 1;
    out_.add(op);
  }

  // Bytes of one of K and V of the slice's own tokens on this GPU.
  double kv_bytes() const { return dims_.tokens * dims_.kv_width * dims_.value_bytes; }
  // Bytes of the slice's hidden states on every GPU of the group (b l h).
  double hidden_bytes() const { return dims_.tokens * dims_.hidden * dims_.value_bytes; }
  // Bytes of the hidden states of the tokens this GPU normalizes.
  double norm_bytes() const { return dims_.norm_tokens * dims_.hidden * dims_.value_bytes; }
  const Dims& dims() const { return dims_; }

 private:
  const OpShape& shape_;
  const Dims& dims_;
  OpList& out_;
};

void add_attention_core_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  const double head_dim = model.head_dim();
  if (model.attention == Attention::kFlash) {
    const double flops = 4 * d.head_batch * d.causal_pairs * head_dim;
    // Reads Q, K and V (the keys of the context too) and writes O.
    const double io = B * (2 * d.tokens * d.q_width + 2 * d.sequences * d.keys * d.kv_width);
    p.flash("flash attention", flops, io, false);
    // Each ring step hands this GPU's current K and V chunk on.
    p.ring_exchange("context-parallel K, V exchange", 2 * p.kv_bytes());
    return;
  }
  // Megatron's baddbmm of Q and K^T, fused scale-mask-softmax, dropout and
  // bmm with V, then the context permuted back to [tokens, heads x d].
  p.gemm("attention scores", d.queries, d.keys, head_dim, d.head_batch);
  p.memory("softmax", 2 * d.scores * B);
  if (d.mask > 0) p.memory("attention dropout", d.scores * (2 * B + d.mask));
  p.gemm("attention over values", d.queries, head_dim, d.keys, d.head_batch);
  p.memory("context transpose", 2 * d.tokens * d.q_width * B);
}

void add_attention_core_backward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  const double head_dim = model.head_dim();
  if (model.attention == Attention::kFlash) {
    // FlashAttention-2's backward: 2.5x the forward's FLOPs, its S = QK^T
    // recomputed inside (Dao 2023, section 4); reads Q, K, V, O, dO and
    // writes dQ, dK, dV.
    const double flops = 2.5 * 4 * d.head_batch * d.causal_pairs * head_dim;
    const double io = B * (4 * d.tokens * d.q_width + 4 * d.sequences * d.keys * d.kv_width);
    p.flash("flash attention backward", flops, io, true);
    // The backward's ring passes K and V on again, and with them the
    // gradients of the chunk's K and V accumulated so far.
    p.ring_exchange("context-parallel K, V, dK, dV exchange", 4 * p.kv_bytes());
    return;
  }
  p.memory("context transpose backward", 2 * d.tokens * d.q_width * B);
  p.gemm("attention probabilities gradient", d.queries, d.keys, head_dim, d.head_batch);
  p.gemm("values gradient", d.keys, head_dim, d.queries, d.head_batch);
  if (d.mask > 0) p.memory("attention dropout backward", d.scores * (2 * B + d.mask));
  p.memory("softmax backward", 3 * d.scores * B);
  p.gemm("queries gradient", d.queries, head_dim, d.keys, d.head_batch);
  p.gemm("keys gradient", d.keys, head_dim, d.queries, d.head_batch);
}

void add_layer_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  const double qkv = d.q_width + 2 * d.kv_width;
  const double residual = p.norm_bytes() * (3 + d.mask / B);  // bias, dropout, residual add
  p.memory("input norm", 2 * p.norm_bytes());
  p.column_parallel_start("all-gather before QKV");
  p.gemm("QKV", d.tokens, qkv, d.hidden);
  if (d.bias) p.memory("QKV bias", 2 * d.tokens * qkv * B);
  if (model.positions == Positions::kRotary) {
    p.memory("rotary embedding", 2 * d.tokens * (d.q_width + d.kv_width) * B);
  }
  add_attention_core_forward(p, model);
  p.gemm("attention output", d.tokens, d.hidden, d.q_width);
  p.row_parallel_end("attention all-reduce");
  p.memory("attention bias-dropout-add", residual);
  p.memory("MLP norm", 2 * p.norm_bytes());
  p.column_parallel_start("all-gather before MLP");
  p.gemm("MLP up", d.tokens, d.up_width, d.hidden);
  // GeLU with its bias fused: read and write; SwiGLU: read gate and up, write.
  p.memory(model.mlp == Mlp::kSwiglu ? "SwiGLU" : "bias-GeLU", (d.up_width + d.ffn) * d.tokens * B);
  p.gemm("MLP down", d.tokens, d.hidden, d.ffn);
  p.row_parallel_end("MLP all-reduce");
  p.memory("MLP bias-dropout-add", residual);
}

void add_layer_input_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  const double qkv = d.q_width + 2 * d.kv_width;
  // Dropout's backward (gradient and mask in, gradient out) and, with
  // biases, the bias gradient's read.
  const double dropout_add = p.norm_bytes() * (2 + d.mask / B + (d.bias ? 1 : 0));
  // A norm's backward reads its input and the gradient and writes one; the
  // residual stream then adds the two branches' gradients.
  const double norm = 3 * p.norm_bytes();
  p.memory("MLP dropout-add backward", dropout_add);
  p.column_parallel_start("all-gather of the MLP output gradient");
  p.gemm("MLP down input gradient", d.tokens, d.ffn, d.hidden);
  // GeLU: input and gradient in, gradient out (and the bias gradient);
  // SwiGLU: gate, up and gradient in, two gradients out.
  p.memory(model.mlp == Mlp::kSwiglu ? "SwiGLU backward" : "bias-GeLU backward",
           d.tokens * B * (model.mlp == Mlp::kSwiglu ? 5 * d.ffn : (d.bias ? 4 : 3) * d.ffn));
  p.gemm("MLP up input gradient", d.tokens, d.hidden, d.up_width);
  p.row_parallel_end("MLP input-gradient all-reduce");
  p.memory("MLP norm backward", norm);
  p.memory("residual gradient add", norm);
  p.memory("attention dropout-add backward", dropout_add);
  p.column_parallel_start("all-gather of the attention output gradient");
  p.gemm("attention output input gradient", d.tokens, d.q_width, d.hidden);
  add_attention_core_backward(p, model);
  if (model.positions == Positions::kRotary) {
    p.memory("rotary embedding backward", 2 * d.tokens * (d.q_width + d.kv_width) * B);
  }
  if (d.bias) p.memory("QKV bias gradient", d.tokens * qkv * B);
  p.gemm("QKV input gradient", d.tokens, d.hidden, qkv);
  p.row_parallel_end("QKV input-gradient all-reduce");
  p.memory("input norm backward", norm);
  p.memory("residual gradient add", norm);
}

void add_layer_weight_grad(PhaseBuilder& p) {
  const Dims& d = p.dims();
  p.weight_gemm("QKV weight gradient", d.hidden, d.q_width + 2 * d.kv_width);
  p.weight_gemm("attention output weight gradient", d.q_width, d.hidden);
  p.weight_gemm("MLP up weight gradient", d.hidden, d.up_width);
  p.weight_gemm("MLP down weight gradient", d.ffn, d.hidden);
}

}  // namespace

Op gemm_op(const char* name, double batch, double m, double n, double k, double value_bytes,
           double result_bytes) {
  Op op;
  op.kind = OpKind::kGemm;
  op.name = name;
  op.batch = batch;
  op.m = m;
  op.n = n;
  op.k = k;
  op.flops = 2 * batch * m * n * k;
  op.bytes = batch * value_bytes * (m * k + k * n);
  op.result_bytes = batch * result_bytes * m * n;
  return op;
}

TokenSlice context_rank_slice(int64_t seq_len, int context) {
  const int64_t cp = context;
  PPSIM_CHECK(cp >= 1 && (cp == 1 || seq_len % (2 * cp) == 0));
  if (cp == 1) return TokenSlice{seq_len, 0};
  return TokenSlice{seq_len / cp, seq_len * (cp - 1) / (2 * cp)};
}

OpShape OpShape::of(const Config& config) {
  OpShape shape;
  shape.model = *config.model;
  shape.micro_batch = config.training.micro_batch;
  shape.tensor = config.parallel.tensor;
  shape.context = config.parallel.context;
  shape.sequence_parallel = config.parallel.sequence_parallel;
  shape.tp_comm_overlap = config.parallel.tp_comm_overlap;
  shape.fused_grad_accumulation = config.training.grad_accumulation_fusion;
  // Megatron accumulates and reduces gradients in fp32 when training in
  // bf16 (it forces accumulate_allreduce_grads_in_fp32), in the model's
  // dtype otherwise (megatron/training/arguments.py).
  shape.grad_bytes = config.model->dtype == DType::kBf16 ? 4 : dtype_bytes(config.model->dtype);
  return shape;
}

PieceOps layer_ops(const OpShape& shape, const TokenSlice& slice) {
  const Dims dims = dims_of(shape, slice);
  PieceOps ops;
  PhaseBuilder forward(shape, dims, ops.forward);
  add_layer_forward(forward, shape.model);
  PhaseBuilder input_grad(shape, dims, ops.input_grad);
  add_layer_input_grad(input_grad, shape.model);
  PhaseBuilder weight_grad(shape, dims, ops.weight_grad);
  add_layer_weight_grad(weight_grad);
  return ops;
}

OpList attention_core_forward(const OpShape& shape, const TokenSlice& slice) {
  const Dims dims = dims_of(shape, slice);
  OpList ops;
  PhaseBuilder builder(shape, dims, ops);
  add_attention_core_forward(builder, shape.model);
  return ops;
}

PieceOps embedding_ops(const OpShape& shape, const TokenSlice& slice) {
  const Dims d = dims_of(shape, slice);
  const double B = d.value_bytes;
  PieceOps ops;
  PhaseBuilder forward(shape, d, ops.forward);
  // The vocabulary-parallel lookup writes every token's row (zeros where
  // another GPU holds the word), then the group sums them.
  forward.memory("embedding lookup", 2 * forward.hidden_bytes());
  if (shape.model.positions == Positions::kLearned) {
    forward.memory("position embedding add", 3 * forward.hidden_bytes());
  }
  forward.row_parallel_end("embedding all-reduce");
  if (d.mask > 0) forward.memory("embedding dropout", forward.norm_bytes() * (2 + d.mask / B));

  PhaseBuilder input_grad(shape, d, ops.input_grad);
  if (d.mask > 0) {
    input_grad.memory("embedding dropout backward", input_grad.norm_bytes() * (2 + d.mask / B));
  }
  input_grad.column_parallel_start("all-gather of the embedding gradient");

  // PyTorch's embedding backward fills a dense gradient of the GPU's
  // vocabulary rows and scatter-adds the tokens' rows into it; the gradient
  // buffer then adds it (never fused into a GEMM).
  PhaseBuilder weight_grad(shape, d, ops.weight_grad);
  const double g = shape.grad_bytes;
  weight_grad.memory("embedding gradient",
                     2 * weight_grad.hidden_bytes() + d.vocab * d.hidden * (2 * B + 2 * g));
  return ops;
}

PieceOps head_ops(const OpShape& shape, const TokenSlice& slice) {
  const Dims d = dims_of(shape, slice);
  const double logits = d.tokens * d.vocab;
  const double loss_reduce = d.tokens * kLossAllReduceBytesPerToken;
  PieceOps ops;
  PhaseBuilder forward(shape, d, ops.forward);
  forward.memory("final norm", 2 * forward.norm_bytes());
  forward.column_parallel_start("all-gather before the logits");
  forward.gemm("logits", d.tokens, d.vocab, d.hidden);
  forward.memory("cross-entropy", logits * kLossForwardBytesPerLogit);
  for (int i = 0; i < kLossAllReduces; ++i) {
    forward.collective_op("cross-entropy all-reduce", CollectiveKind::kAllReduce, loss_reduce);
  }

  PhaseBuilder input_grad(shape, d, ops.input_grad);
  input_grad.memory("cross-entropy backward", logits * kLossBackwardBytesPerLogit);
  input_grad.gemm("logits input gradient", d.tokens, d.hidden, d.vocab);
  input_grad.row_parallel_end("logits input-gradient all-reduce");
  input_grad.memory("final norm backward", 3 * input_grad.norm_bytes());

  PhaseBuilder weight_grad(shape, d, ops.weight_grad);
  weight_grad.weight_gemm("logits weight gradient", d.vocab, d.hidden);
  return ops;
}

}  // namespace ppsim
