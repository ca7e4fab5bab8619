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

Dims dims_of(const OpShape& shape, const TokenSlice& slice) {
  const ModelSpec& model = shape.model;
  const double t = shape.tensor;
  const double b = shape.micro_batch;
  const double l = static_cast<double>(slice.tokens);
  const double c = static_cast<double>(slice.context);
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
  dims.heads = heads;
  dims.qk_dim = model.qk_head_dim();
  dims.v_dim = model.v_head_dim();
  dims.q_width = heads * dims.qk_dim;
  dims.k_width = kv_heads * dims.qk_dim;
  dims.v_width = kv_heads * dims.v_dim;
  dims.o_width = heads * dims.v_dim;
  dims.ffn = ffn;
  dims.head_batch = b * heads;
  dims.queries = l;
  dims.keys = c + l;
  dims.scores = b * heads * l * (c + l);
  dims.causal_pairs = l * c + l * l / 2;
  dims.vocab = model.vocab / t;
  dims.bias = model.bias;
  dims.tensor_parallel = shape.tensor > 1;
  dims.sequence_parallel = shape.sequence_parallel;
  dims.expert_parallel = shape.expert > 1;
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
    weight_gemm(name, m, n, dims_.tokens, 1);
  }
  // `batch` weights of (m x n), each over `tokens` tokens.
  void weight_gemm(const char* name, double m, double n, double tokens, double batch) {
    const double g = shape_.grad_bytes;
    if (shape_.fused_grad_accumulation) {
      out_.add(gemm_op(name, batch, m, n, tokens, dims_.value_bytes, 2 * g));
      return;
    }
    out_.add(gemm_op(name, batch, m, n, tokens, dims_.value_bytes, dims_.value_bytes));
    memory("gradient accumulation", batch * m * n * (2 * g + dims_.value_bytes));
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
  // An all-to-all over the expert-parallel group; nothing without one.
  void all_to_all(const char* name, double bytes) {
    if (shape_.expert > 1) out_.add(collective(name, CollectiveKind::kAllToAll, bytes));
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

  // Bytes of K and V of the slice's own tokens on this GPU.
  double kv_bytes() const {
    return dims_.tokens * (dims_.k_width + dims_.v_width) * dims_.value_bytes;
  }
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

// Bytes of the queries and outputs of the slice's tokens, and of the keys
// and values of the keys they attend to, on this GPU.
double attention_io_bytes(const Dims& d) {
  return d.value_bytes *
         (d.tokens * (d.q_width + d.o_width) + d.sequences * d.keys * (d.k_width + d.v_width));
}

void add_attention_core_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  if (model.attention == Attention::kFlash) {
    // Q K^T over the query-key width, P V over the value width.
    const double flops = 2 * d.head_batch * d.causal_pairs * (d.qk_dim + d.v_dim);
    // Reads Q, K and V (the keys of the context too) and writes O.
    p.flash("flash attention", flops, attention_io_bytes(d), false);
    // Each ring step hands this GPU's current K and V chunk on.
    p.ring_exchange("context-parallel K, V exchange", p.kv_bytes());
    return;
  }
  // Megatron's baddbmm of Q and K^T, fused scale-mask-softmax, dropout and
  // bmm with V, then the context permuted back to [tokens, heads x d].
  p.gemm("attention scores", d.queries, d.keys, d.qk_dim, d.head_batch);
  p.memory("softmax", 2 * d.scores * B);
  if (d.mask > 0) p.memory("attention dropout", d.scores * (2 * B + d.mask));
  p.gemm("attention over values", d.queries, d.v_dim, d.keys, d.head_batch);
  p.memory("context transpose", 2 * d.tokens * d.o_width * B);
}

void add_attention_core_backward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  if (model.attention == Attention::kFlash) {
    // FlashAttention-2's backward: 2.5x the forward's FLOPs, its S = QK^T
    // recomputed inside (Dao 2023, section 4); reads Q, K, V, O, dO and
    // writes dQ, dK, dV.
    const double flops = 2.5 * 2 * d.head_batch * d.causal_pairs * (d.qk_dim + d.v_dim);
    p.flash("flash attention backward", flops, 2 * attention_io_bytes(d), true);
    // The backward's ring passes K and V on again, and with them the
    // gradients of the chunk's K and V accumulated so far.
    p.ring_exchange("context-parallel K, V, dK, dV exchange", 2 * p.kv_bytes());
    return;
  }
  p.memory("context transpose backward", 2 * d.tokens * d.o_width * B);
  p.gemm("attention probabilities gradient", d.queries, d.keys, d.v_dim, d.head_batch);
  p.gemm("values gradient", d.keys, d.v_dim, d.queries, d.head_batch);
  if (d.mask > 0) p.memory("attention dropout backward", d.scores * (2 * B + d.mask));
  p.memory("softmax backward", 3 * d.scores * B);
  p.gemm("queries gradient", d.queries, d.qk_dim, d.keys, d.head_batch);
  p.gemm("keys gradient", d.keys, d.qk_dim, d.queries, d.head_batch);
}

// An MLP's columns on this GPU: its hidden units, and the up projection's
// output (the hidden units, or gate and up with SwiGLU).
struct MlpWidth {
  double ffn;
  double up;
};

MlpWidth mlp_width(const ModelSpec& model, double ffn) {
  return MlpWidth{ffn, model.mlp == Mlp::kSwiglu ? 2 * ffn : ffn};
}

// Bias, dropout and the residual add after a branch.
double residual_bytes(const PhaseBuilder& p) {
  return p.norm_bytes() * (3 + p.dims().mask / p.dims().value_bytes);
}

// The up projection, GeLU with its bias fused (read and write) or SwiGLU
// (read gate and up, write), the down projection, over `tokens` rows of
// each of `batch` MLPs (a dense one, or experts).
void add_mlp_core_forward(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w, double tokens,
                          double batch = 1) {
  const Dims& d = p.dims();
  p.gemm("MLP up", tokens, w.up, d.hidden, batch);
  p.memory(model.mlp == Mlp::kSwiglu ? "SwiGLU" : "bias-GeLU",
           batch * (w.up + w.ffn) * tokens * d.value_bytes);
  p.gemm("MLP down", tokens, d.hidden, w.ffn, batch);
}

// Their input gradients: GeLU's backward reads input and gradient and writes
// one (and the bias gradient); SwiGLU's reads gate, up and gradient and
// writes two.
void add_mlp_core_input_grad(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w,
                             double tokens, double batch = 1) {
  const Dims& d = p.dims();
  p.gemm("MLP down input gradient", tokens, w.ffn, d.hidden, batch);
  const double values = model.mlp == Mlp::kSwiglu ? 5 : (d.bias ? 4 : 3);
  p.memory(model.mlp == Mlp::kSwiglu ? "SwiGLU backward" : "bias-GeLU backward",
           batch * tokens * d.value_bytes * values * w.ffn);
  p.gemm("MLP up input gradient", tokens, d.hidden, w.up, batch);
}

// A dense MLP of the layer's tokens, with its tensor-parallel collectives.
void add_dense_mlp_forward(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w) {
  p.column_parallel_start("all-gather before MLP");
  add_mlp_core_forward(p, model, w, p.dims().tokens);
  p.row_parallel_end("MLP all-reduce");
}

void add_dense_mlp_input_grad(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w) {
  p.column_parallel_start("all-gather of the MLP output gradient");
  add_mlp_core_input_grad(p, model, w, p.dims().tokens);
  p.row_parallel_end("MLP input-gradient all-reduce");
}

void add_dense_mlp_weight_grad(PhaseBuilder& p, const MlpWidth& w) {
  p.weight_gemm("MLP up weight gradient", p.dims().hidden, w.up);
  p.weight_gemm("MLP down weight gradient", w.ffn, p.dims().hidden);
}

// Multi-head latent attention's projections on this GPU (Megatron-Core's
// MLASelfAttention): the down projections run whole on every tensor rank,
// the up projections split by heads. The rotary part is applied to each
// head's query and to the one key part the heads share, and each head's Q
// and K are assembled from their two parts.
struct LatentWidths {
  double q_latent;   // 0 without a query latent
  double kv_latent;  // kv_lora_rank
  double kv_down;    // kv_lora_rank + qk_rope_head_dim
  double kv_up;      // heads on this GPU x (qk_nope_head_dim + v_head_dim)
  double rope;       // qk_rope_head_dim
};

LatentWidths latent_widths(const ModelSpec& model, const Dims& d) {
  const MlaSpec& mla = *model.mla;
  return LatentWidths{static_cast<double>(mla.q_lora_rank), static_cast<double>(mla.kv_lora_rank),
                      static_cast<double>(mla.kv_lora_rank + mla.qk_rope_head_dim),
                      d.heads * (mla.qk_nope_head_dim + mla.v_head_dim),
                      static_cast<double>(mla.qk_rope_head_dim)};
}

void add_latent_projections_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const LatentWidths w = latent_widths(model, d);
  const double T = d.tokens;
  const double B = d.value_bytes;
  if (w.q_latent > 0) {
    p.gemm("Q down", T, w.q_latent, d.hidden);
    p.memory("Q latent norm", 2 * T * w.q_latent * B);
    p.gemm("Q up", T, d.q_width, w.q_latent);
  } else {
    p.gemm("Q", T, d.q_width, d.hidden);
  }
  p.gemm("KV down", T, w.kv_down, d.hidden);
  p.memory("KV latent norm", 2 * T * w.kv_latent * B);
  p.gemm("KV up", T, w.kv_up, w.kv_latent);
  p.memory("rotary embedding", 2 * T * (d.heads + 1) * w.rope * B);
  p.memory("Q and K assembly", 2 * T * (d.q_width + d.k_width) * B);
}

void add_latent_projections_input_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const LatentWidths w = latent_widths(model, d);
  const double T = d.tokens;
  const double B = d.value_bytes;
  p.memory("Q and K assembly backward", 2 * T * (d.q_width + d.k_width) * B);
  p.memory("rotary embedding backward", 2 * T * (d.heads + 1) * w.rope * B);
  p.gemm("KV up input gradient", T, w.kv_latent, w.kv_up);
  p.memory("KV latent norm backward", 3 * T * w.kv_latent * B);
  p.gemm("KV down input gradient", T, d.hidden, w.kv_down);
  if (w.q_latent > 0) {
    p.gemm("Q up input gradient", T, w.q_latent, d.q_width);
    p.memory("Q latent norm backward", 3 * T * w.q_latent * B);
    p.gemm("Q down input gradient", T, d.hidden, w.q_latent);
  } else {
    p.gemm("Q input gradient", T, d.hidden, d.q_width);
  }
}

void add_latent_projections_weight_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const LatentWidths w = latent_widths(model, d);
  if (w.q_latent > 0) {
    p.weight_gemm("Q down weight gradient", d.hidden, w.q_latent);
    p.weight_gemm("Q up weight gradient", w.q_latent, d.q_width);
  } else {
    p.weight_gemm("Q weight gradient", d.hidden, d.q_width);
  }
  p.weight_gemm("KV down weight gradient", d.hidden, w.kv_down);
  p.weight_gemm("KV up weight gradient", w.kv_latent, w.kv_up);
}

// The fused QKV projection (with its bias) and the rotary embedding.
void add_qkv_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  const double qkv = d.q_width + d.k_width + d.v_width;
  p.gemm("QKV", d.tokens, qkv, d.hidden);
  if (d.bias) p.memory("QKV bias", 2 * d.tokens * qkv * B);
  if (model.positions == Positions::kRotary) {
    p.memory("rotary embedding", 2 * d.tokens * (d.q_width + d.k_width) * B);
  }
}

void add_qkv_input_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  const double qkv = d.q_width + d.k_width + d.v_width;
  if (model.positions == Positions::kRotary) {
    p.memory("rotary embedding backward", 2 * d.tokens * (d.q_width + d.k_width) * B);
  }
  if (d.bias) p.memory("QKV bias gradient", d.tokens * qkv * B);
  p.gemm("QKV input gradient", d.tokens, d.hidden, qkv);
}

// The first half of a layer: the input norm, the Q, K and V projections,
// the attention core, the output projection, the residual; then the MLP's
// norm.
void add_attention_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  p.memory("input norm", 2 * p.norm_bytes());
  p.column_parallel_start("all-gather before QKV");
  if (model.mla) {
    add_latent_projections_forward(p, model);
  } else {
    add_qkv_forward(p, model);
  }
  add_attention_core_forward(p, model);
  p.gemm("attention output", d.tokens, d.hidden, d.o_width);
  p.row_parallel_end("attention all-reduce");
  p.memory("attention bias-dropout-add", residual_bytes(p));
  p.memory("MLP norm", 2 * p.norm_bytes());
}

// Dropout's backward (gradient and mask in, gradient out) and, with biases,
// the bias gradient's read.
double dropout_add_backward_bytes(const PhaseBuilder& p) {
  const Dims& d = p.dims();
  return p.norm_bytes() * (2 + d.mask / d.value_bytes + (d.bias ? 1 : 0));
}

// The second half of a layer's input gradient, after its MLP's: the MLP
// norm's backward, the residual, the attention branch and the input norm.
// A norm's backward reads its input and the gradient and writes one; the
// residual stream then adds the two branches' gradients.
void add_attention_input_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double norm = 3 * p.norm_bytes();
  p.memory("MLP norm backward", norm);
  p.memory("residual gradient add", norm);
  p.memory("attention dropout-add backward", dropout_add_backward_bytes(p));
  p.column_parallel_start("all-gather of the attention output gradient");
  p.gemm("attention output input gradient", d.tokens, d.o_width, d.hidden);
  add_attention_core_backward(p, model);
  if (model.mla) {
    add_latent_projections_input_grad(p, model);
  } else {
    add_qkv_input_grad(p, model);
  }
  p.row_parallel_end("QKV input-gradient all-reduce");
  p.memory("input norm backward", norm);
  p.memory("residual gradient add", norm);
}

void add_attention_weight_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  if (model.mla) {
    add_latent_projections_weight_grad(p, model);
  } else {
    p.weight_gemm("QKV weight gradient", d.hidden, d.q_width + d.k_width + d.v_width);
  }
  p.weight_gemm("attention output weight gradient", d.o_width, d.hidden);
}

void add_layer_forward(PhaseBuilder& p, const ModelSpec& model) {
  add_attention_forward(p, model);
  add_dense_mlp_forward(p, model, mlp_width(model, p.dims().ffn));
  p.memory("MLP bias-dropout-add", residual_bytes(p));
}

void add_layer_input_grad(PhaseBuilder& p, const ModelSpec& model) {
  p.memory("MLP dropout-add backward", dropout_add_backward_bytes(p));
  add_dense_mlp_input_grad(p, model, mlp_width(model, p.dims().ffn));
  add_attention_input_grad(p, model);
}

void add_layer_weight_grad(PhaseBuilder& p, const ModelSpec& model) {
  add_attention_weight_grad(p, model);
  add_dense_mlp_weight_grad(p, mlp_width(model, p.dims().ffn));
}

// One MoE layer's routing on this GPU (Megatron-Core's all-to-all token
// dispatcher, expert tensor parallelism equal to t): it routes the
// `routed` tokens it normalizes to top_k experts each, receives `received`
// rows from its expert group, and with t > 1 gathers the tensor group's
// into `gathered` rows for its local experts, `mean` of them on each expert
// at the mean and `busiest` on the busiest.
struct Routing {
  double experts;
  double top_k;
  double local;
  double routed;
  double received;
  double gathered;
  double mean;
  double busiest;
  MlpWidth width;  // an expert's columns on this GPU
};

Routing routing_of(const OpShape& shape, const Dims& d) {
  const MoeSpec& moe = *shape.model.moe;
  const ExpertLoad load = expert_load(moe, shape.expert);
  Routing r{};
  r.experts = moe.experts;
  r.top_k = moe.top_k;
  r.local = load.local_experts;
  r.routed = d.norm_tokens;
  r.received = d.norm_tokens * moe.top_k * load.busiest_gpu;
  r.gathered = r.received * shape.tensor;
  r.mean = d.tokens * moe.top_k / r.local;
  r.busiest = r.mean * load.busiest_expert;
  r.width = mlp_width(shape.model, static_cast<double>(moe.expert_ffn_hidden) / shape.tensor);
  return r;
}

// Calls add(batch, tokens) for the local experts at the mean and for the
// busiest one.
template <typename AddFn>
void for_local_experts(const Routing& r, AddFn add) {
  if (r.busiest == r.mean) {
    add(r.local, r.mean);
    return;
  }
  if (r.local > 1) add(r.local - 1, r.mean);
  add(1.0, r.busiest);
}

// Megatron's router: the logits GEMM, then softmax and top-k over them in
// fp32 (4 bytes written and read again).
constexpr double kRouterFp32Bytes = 8;

// The way to the local experts and back around `experts` (their forward,
// or their input gradient, which goes the same way): the all-to-all to the
// experts' GPUs, the tensor group's all-gather, with several local experts
// fed from several GPUs the rows sorted by expert; then all of it undone.
template <typename ExpertsFn>
void around_local_experts(PhaseBuilder& p, const Routing& r, bool backward, ExpertsFn experts) {
  const double row_bytes = p.dims().hidden * p.dims().value_bytes;
  const double received = r.received * row_bytes;
  const double gathered = r.gathered * row_bytes;
  p.all_to_all(backward ? "expert combine all-to-all backward" : "expert dispatch all-to-all",
               received);
  p.collective_op("expert all-gather", CollectiveKind::kAllGather, gathered);
  const bool sort = r.local > 1 && p.dims().expert_parallel;
  if (sort) p.memory("sort by local expert", 2 * gathered);
  for_local_experts(r, experts);
  if (sort) p.memory("unsort by local expert", 2 * gathered);
  p.collective_op("expert reduce-scatter", CollectiveKind::kReduceScatter, gathered);
  p.all_to_all(backward ? "expert dispatch all-to-all backward" : "expert combine all-to-all",
               received);
}

void add_moe_forward(PhaseBuilder& p, const ModelSpec& model, const Routing& r) {
  const double h = p.dims().hidden;
  const double B = p.dims().value_bytes;
  p.gemm("router", r.routed, r.experts, h);
  p.memory("router softmax and top-k", r.routed * r.experts * (B + kRouterFp32Bytes));
  // Each token's row copied top_k times in expert order.
  p.memory("token permutation", 2 * r.routed * r.top_k * h * B);
  around_local_experts(p, r, false, [&](double batch, double tokens) {
    add_mlp_core_forward(p, model, r.width, tokens, batch);
  });
  // Each token's top_k rows read, weighted and summed into one.
  p.memory("token unpermutation", r.routed * h * B * (r.top_k + 1));
}

void add_moe_input_grad(PhaseBuilder& p, const ModelSpec& model, const Routing& r) {
  const double h = p.dims().hidden;
  const double B = p.dims().value_bytes;
  // The gradient copied to each of the top_k rows, and the rows read again
  // for the routing weights' gradient.
  p.memory("token unpermutation backward", r.routed * h * B * (2 * r.top_k + 1));
  around_local_experts(p, r, true, [&](double batch, double tokens) {
    add_mlp_core_input_grad(p, model, r.width, tokens, batch);
  });
  p.memory("token permutation backward", r.routed * h * B * (r.top_k + 1));
  p.memory("router softmax and top-k backward", r.routed * r.experts * (B + kRouterFp32Bytes));
  p.gemm("router input gradient", r.routed, h, r.experts);
}

void add_moe_weight_grad(PhaseBuilder& p, const Routing& r) {
  const double h = p.dims().hidden;
  p.weight_gemm("router weight gradient", h, r.experts, r.routed, 1);
  for_local_experts(r, [&](double batch, double tokens) {
    p.weight_gemm("expert up weight gradient", h, r.width.up, tokens, batch);
    p.weight_gemm("expert down weight gradient", r.width.ffn, h, tokens, batch);
  });
}

// The shared experts: one dense MLP of shared_experts x expert_ffn_hidden.
MlpWidth shared_width(const OpShape& shape) {
  const MoeSpec& moe = *shape.model.moe;
  return mlp_width(shape.model,
                   static_cast<double>(moe.shared_experts) * moe.expert_ffn_hidden / shape.tensor);
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
  shape.expert = config.parallel.expert;
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
  add_layer_weight_grad(weight_grad, shape.model);
  return ops;
}

ExpertLoad expert_load(const MoeSpec& moe, int expert_parallel) {
  ExpertLoad load;
  load.local_experts = static_cast<double>(moe.experts) / expert_parallel;
  load.busiest_expert =
      moe.capacity_factor > 0 ? std::min(moe.imbalance, moe.capacity_factor) : moe.imbalance;
  load.busiest_gpu = (load.local_experts - 1 + load.busiest_expert) / load.local_experts;
  return load;
}

PieceOps moe_layer_ops(const OpShape& shape, const TokenSlice& slice) {
  PPSIM_CHECK(shape.model.moe.has_value());
  PPSIM_CHECK(shape.tensor == 1 || shape.sequence_parallel);
  const Dims dims = dims_of(shape, slice);
  const Routing routing = routing_of(shape, dims);
  const bool shared = shape.model.moe->shared_experts > 0;
  PieceOps ops;
  PhaseBuilder forward(shape, dims, ops.forward);
  add_attention_forward(forward, shape.model);
  add_moe_forward(forward, shape.model, routing);
  if (shared) add_dense_mlp_forward(forward, shape.model, shared_width(shape));
  forward.memory("MLP bias-dropout-add", residual_bytes(forward));

  PhaseBuilder input_grad(shape, dims, ops.input_grad);
  input_grad.memory("MLP dropout-add backward", dropout_add_backward_bytes(input_grad));
  if (shared) add_dense_mlp_input_grad(input_grad, shape.model, shared_width(shape));
  add_moe_input_grad(input_grad, shape.model, routing);
  add_attention_input_grad(input_grad, shape.model);

  PhaseBuilder weight_grad(shape, dims, ops.weight_grad);
  add_attention_weight_grad(weight_grad, shape.model);
  add_moe_weight_grad(weight_grad, routing);
  if (shared) add_dense_mlp_weight_grad(weight_grad, shared_width(shape));
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
