// The kernels of a transformer layer, the embedding and the head, phase by
// phase, as Megatron-LM runs them (docs/cost_model.md, "Operations"): the
// byte counts follow the kernels' reads and writes, in the model's dtype
// unless said otherwise.
#include "sim/cost/layer_ops.h"

#include <algorithm>

#include "sim/cost/layer_ops_internal.h"

namespace ppsim {
namespace layer_ops_internal {

// PyTorch's dropout (native_dropout) keeps a one-byte mask per element.
constexpr double kMaskBytes = 1;
// The loss's own all-reduces over the tensor group (maximum, target logit,
// sum of exponentials), one fp32 value per token each.
constexpr int kLossAllReduces = 3;
constexpr double kLossAllReduceBytesPerToken = 4;

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

// Bytes of the queries and outputs of the slice's tokens, and of the keys
// and values of the keys they attend to, on this GPU.
double attention_io_bytes(const Dims& d) {
  return d.value_bytes *
         (d.tokens * (d.q_width + d.o_width) + d.sequences * d.keys * (d.k_width + d.v_width));
}

// Megatron's fused causal softmax (scaled_upper_triang_masked_softmax.h)
// reads the scores, and in its backward the gradient and the saved output,
// only where a query may attend (each row up to its diagonal), and writes
// every element, zeros above the diagonal: the share of the scores it reads.
double causal_share(const Dims& d) { return d.causal_pairs / (d.queries * d.keys); }

// Transformer Engine's ring around its attention kernels (AttnFuncWithCP,
// read at v1.4; the same copies and sums at 2.x): a causal step that sees
// half of a chunk copies that half to be contiguous, and the steps'
// partial results are summed. Counted at the ring's last GPU, every later
// step of which takes half of the arriving K and V (the ring holds the
// GPUs in step). Forward: cp - 1 half-chunk copies of K and V (read and
// write: |KV| each) and cp partial outputs merged into the zeroed result
// (read both, write one: 3 |O| each, |O| to zero it).
double context_ring_forward_bytes(const PhaseBuilder& p) {
  const Dims& d = p.dims();
  const double c = p.context();
  const double o = d.tokens * d.o_width * d.value_bytes;
  return (c - 1) * p.kv_bytes() + (3 * c + 1) * o;
}

// Backward: each later step copies half of K and V again (|KV|), adds its
// dQ into the sum (3 |Q|), concatenates its half dK and dV (|KV|) and adds
// them into theirs (1.5 |KV|); K and V copied into the ring's buffer, the
// first step's whole dK and dV concatenated and copied (2 |KV| each) and
// its dQ copied (2 |Q|).
double context_ring_backward_bytes(const PhaseBuilder& p) {
  const Dims& d = p.dims();
  const double c = p.context();
  const double q = d.tokens * d.q_width * d.value_bytes;
  const double kv = p.kv_bytes();
  return (c - 1) * (3.5 * kv + 3 * q) + 6 * kv + 2 * q;
}

void add_attention_core_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  if (model.attention == Attention::kFlash) {
    // Q K^T over the query-key width, P V over the value width.
    const double flops = 2 * d.head_batch * d.causal_pairs * (d.qk_dim + d.v_dim);
    // The context group's K and V all-gathered first, or each ring step
    // handing this GPU's current K and V chunk on beside the kernel.
    if (p.context_all_gather()) {
      p.context_collective("context-parallel K, V all-gather", CollectiveKind::kAllGather,
                           p.kv_bytes());
    }
    // Reads Q, K and V (the keys of the context too) and writes O.
    p.flash("flash attention", flops, attention_io_bytes(d), false);
    if (p.has_context_ring()) {
      p.ring_exchange("context-parallel K, V exchange", p.kv_bytes());
      p.memory("context-parallel copies and merge", context_ring_forward_bytes(p));
    }
    return;
  }
  // Megatron's baddbmm of Q and K^T, fused scale-mask-softmax, dropout and
  // bmm with V, then the context permuted back to [tokens, heads x d].
  p.gemm("attention scores", d.queries, d.keys, d.qk_dim, d.head_batch);
  p.memory("softmax", (causal_share(d) + 1) * d.scores * B);
  if (d.mask > 0) p.dropout("attention dropout", d.scores * (2 * B + d.mask), d.scores);
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
    if (p.context_all_gather()) {
      // Transformer Engine keeps only the GPU's own K and V: gathered again,
      // and the gradients of every chunk's K and V reduce-scattered after.
      p.context_collective("context-parallel K, V all-gather", CollectiveKind::kAllGather,
                           p.kv_bytes());
      p.flash("flash attention backward", flops, 2 * attention_io_bytes(d), true);
      p.context_collective("context-parallel dK, dV reduce-scatter", CollectiveKind::kReduceScatter,
                           p.kv_bytes());
      return;
    }
    p.flash("flash attention backward", flops, 2 * attention_io_bytes(d), true);
    // The backward's ring passes K and V on again, and with them the
    // gradients of the chunk's K and V accumulated so far.
    p.ring_exchange("context-parallel K, V, dK, dV exchange", 2 * p.kv_bytes());
    if (p.has_context_ring()) {
      p.memory("context-parallel copies and sums", context_ring_backward_bytes(p));
    }
    return;
  }
  p.memory("context transpose backward", 2 * d.tokens * d.o_width * B);
  p.gemm("attention probabilities gradient", d.queries, d.keys, d.v_dim, d.head_batch);
  p.gemm("values gradient", d.keys, d.v_dim, d.queries, d.head_batch);
  if (d.mask > 0) p.memory("attention dropout backward", d.scores * (2 * B + d.mask));
  p.memory("softmax backward", (2 * causal_share(d) + 1) * d.scores * B);
  p.gemm("queries gradient", d.queries, d.qk_dim, d.keys, d.head_batch);
  p.gemm("keys gradient", d.keys, d.qk_dim, d.queries, d.head_batch);
}

MlpWidth mlp_width(const ModelSpec& model, double ffn) {
  return MlpWidth{ffn, model.mlp == Mlp::kSwiglu ? 2 * ffn : ffn};
}

// The activation's kernels, forward and backward, by the MLP's name. A
// squared ReLU is one fused kernel each way, as GeLU is (Megatron-Core's
// `squared_relu` runs under its jit fuser; Transformer Engine's `srelu`),
// moving a GeLU's bytes: only the names differ.
struct ActivationKernels {
  const char* forward;
  const char* backward;
};

ActivationKernels activation_kernels(Mlp mlp) {
  switch (mlp) {
    case Mlp::kSwiglu:
      return {"SwiGLU", "SwiGLU backward"};
    case Mlp::kSquaredRelu:
      return {"squared ReLU", "squared ReLU backward"};
    case Mlp::kGelu:
      break;
  }
  return {"bias-GeLU", "bias-GeLU backward"};
}

double residual_bytes(const PhaseBuilder& p) {
  return p.norm_bytes() * (3 + p.dims().mask / p.dims().value_bytes);
}

void add_mlp_core_forward(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w, double tokens,
                          const Operand& up_input, double batch) {
  const Dims& d = p.dims();
  p.linear("MLP up", tokens, w.up, d.hidden, up_input, batch);
  p.memory(activation_kernels(model.mlp).forward, batch * (w.up + w.ffn) * tokens * d.value_bytes);
  p.linear("MLP down", tokens, d.hidden, w.ffn, Fp8Input::kCast, batch);
}

void add_mlp_core_input_grad(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w,
                             double tokens, const Operand& down_grad, double batch) {
  const Dims& d = p.dims();
  p.linear("MLP down input gradient", tokens, w.ffn, d.hidden, down_grad, batch);
  const double values = model.mlp == Mlp::kSwiglu ? 5 : (d.bias ? 4 : 3);
  p.memory(activation_kernels(model.mlp).backward, batch * tokens * d.value_bytes * values * w.ffn);
  p.linear("MLP up input gradient", tokens, d.hidden, w.up, Fp8Input::kCast, batch);
}

void add_dense_mlp_forward(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w,
                           Fp8Input up_input) {
  add_mlp_core_forward(p, model, w, p.dims().tokens, Operand(up_input, "all-gather before MLP"));
  p.row_parallel_output("MLP all-reduce");
}

int add_dense_mlp_input_grad(PhaseBuilder& p, const ModelSpec& model, const MlpWidth& w) {
  add_mlp_core_input_grad(p, model, w, p.dims().tokens,
                          Operand(Fp8Input::kCast, "all-gather of the MLP output gradient"));
  return p.row_parallel_end("MLP input-gradient all-reduce");
}

int add_dense_mlp_weight_grad(PhaseBuilder& p, const MlpWidth& w) {
  const int up = p.linear_weight_gemm("MLP up weight gradient", p.dims().hidden, w.up);
  p.linear_weight_gemm("MLP down weight gradient", w.ffn, p.dims().hidden);
  return up;
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
    p.linear("Q down", T, w.q_latent, d.hidden, Fp8Input::kCast);
    p.memory("Q latent norm", 2 * T * w.q_latent * B);
    p.linear("Q up", T, d.q_width, w.q_latent, Fp8Input::kCast);
  } else {
    p.linear("Q", T, d.q_width, d.hidden, Fp8Input::kCast);
  }
  p.linear("KV down", T, w.kv_down, d.hidden, Fp8Input::kCast);
  p.memory("KV latent norm", 2 * T * w.kv_latent * B);
  p.linear("KV up", T, w.kv_up, w.kv_latent, Fp8Input::kCast);
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
  p.linear("KV up input gradient", T, w.kv_latent, w.kv_up, Fp8Input::kCast);
  p.memory("KV latent norm backward", 3 * T * w.kv_latent * B);
  p.linear("KV down input gradient", T, d.hidden, w.kv_down, Fp8Input::kCast);
  if (w.q_latent > 0) {
    p.linear("Q up input gradient", T, w.q_latent, d.q_width, Fp8Input::kCast);
    p.memory("Q latent norm backward", 3 * T * w.q_latent * B);
    p.linear("Q down input gradient", T, d.hidden, w.q_latent, Fp8Input::kCast);
  } else {
    p.linear("Q input gradient", T, d.hidden, d.q_width, Fp8Input::kCast);
  }
}

void add_latent_projections_weight_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const LatentWidths w = latent_widths(model, d);
  if (w.q_latent > 0) {
    p.linear_weight_gemm("Q down weight gradient", d.hidden, w.q_latent);
    p.linear_weight_gemm("Q up weight gradient", w.q_latent, d.q_width);
  } else {
    p.linear_weight_gemm("Q weight gradient", d.hidden, d.q_width);
  }
  p.linear_weight_gemm("KV down weight gradient", d.hidden, w.kv_down);
  p.linear_weight_gemm("KV up weight gradient", w.kv_latent, w.kv_up);
}

// The QKV projection's bias: Megatron's linear layer adds it to the GEMM's
// result in a kernel of its own, and its gradient is a kernel's sum of the
// output gradient. In FP8 the projection is Transformer Engine's, whose GEMM
// adds the bias in its epilogue and whose cast of the output gradient sums
// it as it reads it (cast-transpose-dbias): no kernel of their own.
bool separate_qkv_bias(const PhaseBuilder& p) { return p.dims().bias && !p.fp8(); }

// The fused QKV projection (with its bias) and the rotary embedding.
void add_qkv_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double B = d.value_bytes;
  const double qkv = d.q_width + d.k_width + d.v_width;
  p.linear("QKV", d.tokens, qkv, d.hidden, Operand(Fp8Input::kNorm, "all-gather before QKV"));
  if (separate_qkv_bias(p)) p.memory("QKV bias", 2 * d.tokens * qkv * B);
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
  if (separate_qkv_bias(p)) p.memory("QKV bias gradient", d.tokens * qkv * B);
  p.linear("QKV input gradient", d.tokens, d.hidden, qkv, Fp8Input::kCast);
}

void add_attention_forward(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  p.set_graph(CudaGraphScope::kAttention);
  p.memory("input norm", 2 * p.norm_bytes());
  if (model.mla) {
    p.column_parallel_start("all-gather before QKV");
    add_latent_projections_forward(p, model);
  } else {
    add_qkv_forward(p, model);
  }
  add_attention_core_forward(p, model);
  p.linear("attention output", d.tokens, d.hidden, d.o_width, Fp8Input::kCast);
  p.row_parallel_output("attention all-reduce");
  p.dropout("attention bias-dropout-add", residual_bytes(p), p.norm_elements());
  p.set_graph(CudaGraphScope::kNone);
  p.memory("MLP norm", 2 * p.norm_bytes());
}

double dropout_add_backward_bytes(const PhaseBuilder& p) {
  const Dims& d = p.dims();
  return p.norm_bytes() * (2 + d.mask / d.value_bytes + (d.bias ? 1 : 0));
}

// The second half of a layer's input gradient, after its MLP's: the MLP
// norm's backward, the residual, the attention branch and the input norm.
// A norm's backward reads its input and the gradient and writes one; the
// residual stream then adds the two branches' gradients.
int add_attention_input_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  const double norm = 3 * p.norm_bytes();
  p.memory("MLP norm backward", norm);
  p.memory("residual gradient add", norm);
  p.set_graph(CudaGraphScope::kAttention);
  p.memory("attention dropout-add backward", dropout_add_backward_bytes(p));
  p.linear("attention output input gradient", d.tokens, d.o_width, d.hidden,
           Operand(Fp8Input::kCast, "all-gather of the attention output gradient"));
  add_attention_core_backward(p, model);
  if (model.mla) {
    add_latent_projections_input_grad(p, model);
  } else {
    add_qkv_input_grad(p, model);
  }
  const int qkv = p.row_parallel_end("QKV input-gradient all-reduce");
  p.memory("input norm backward", norm);
  p.set_graph(CudaGraphScope::kNone);
  p.memory("residual gradient add", norm);
  return model.mla ? -1 : qkv;
}

int add_attention_weight_grad(PhaseBuilder& p, const ModelSpec& model) {
  const Dims& d = p.dims();
  p.set_graph(CudaGraphScope::kAttention);
  int qkv = -1;
  if (model.mla) {
    add_latent_projections_weight_grad(p, model);
  } else {
    qkv = p.linear_weight_gemm("QKV weight gradient", d.hidden, d.q_width + d.k_width + d.v_width);
  }
  p.linear_weight_gemm("attention output weight gradient", d.o_width, d.hidden);
  p.set_graph(CudaGraphScope::kNone);
  return qkv;
}

void run_beside(const OpShape& shape, int collective, int gemm, PieceOps& ops) {
  if (!shape.tp_backward_overlap || collective < 0 || gemm < 0) return;
  ops.input_grad.at(collective).weight_partner = gemm;
}

void add_layer_forward(PhaseBuilder& p, const ModelSpec& model) {
  add_attention_forward(p, model);
  p.set_graph(CudaGraphScope::kMlp);
  add_dense_mlp_forward(p, model, mlp_width(model, p.dims().ffn), Fp8Input::kNorm);
  p.dropout("MLP bias-dropout-add", residual_bytes(p), p.norm_elements());
  p.set_graph(CudaGraphScope::kNone);
}

// A dense layer's column-parallel pairs: its input-gradient collectives, or
// its weight-gradient GEMMs, by index.
struct ColumnParallelPairs {
  int qkv = -1;
  int mlp_up = -1;
};

ColumnParallelPairs add_layer_input_grad(PhaseBuilder& p, const ModelSpec& model) {
  p.set_graph(CudaGraphScope::kMlp);
  p.memory("MLP dropout-add backward", dropout_add_backward_bytes(p));
  ColumnParallelPairs collectives;
  collectives.mlp_up = add_dense_mlp_input_grad(p, model, mlp_width(model, p.dims().ffn));
  p.set_graph(CudaGraphScope::kNone);
  collectives.qkv = add_attention_input_grad(p, model);
  return collectives;
}

ColumnParallelPairs add_layer_weight_grad(PhaseBuilder& p, const ModelSpec& model) {
  ColumnParallelPairs gemms;
  gemms.qkv = add_attention_weight_grad(p, model);
  p.set_graph(CudaGraphScope::kMlp);
  gemms.mlp_up = add_dense_mlp_weight_grad(p, mlp_width(model, p.dims().ffn));
  p.set_graph(CudaGraphScope::kNone);
  return gemms;
}

}  // namespace layer_ops_internal

using namespace layer_ops_internal;

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
  shape.context_comm = config.parallel.context_comm;
  shape.sequence_parallel = config.parallel.sequence_parallel;
  shape.tp_comm_overlap = config.parallel.tp_comm_overlap;
  shape.tp_backward_overlap = config.parallel.tp_backward_overlap;
  shape.fused_grad_accumulation = config.training.grad_accumulation_fusion;
  shape.grad_bytes = gradient_bytes(config.training, config.model->dtype);
  shape.expert = config.parallel.expert;
  shape.moe_dispatcher = config.training.moe_dispatcher;
  shape.cross_entropy = config.training.cross_entropy;
  shape.fp8 = config.training.fp8;
  shape.fp8_transposes = !config.hardware || config.hardware->fp8_gemm_needs_transposes();
  return shape;
}

// Megatron's vocabulary-parallel cross-entropy casts the logits to fp32 (2
// read, 4 written), takes the maximum (4), subtracts it (4 + 4), exponentiates
// (4 + 4), sums (4) and normalizes (4 + 4) in place: 38 bytes per logit
// forward; its backward scales the saved softmax (4 + 4) and casts the
// gradient back (4 + 2): 14 (megatron/core/tensor_parallel/cross_entropy.py);
// it keeps the fp32 softmax beside the logits. With cross_entropy_loss_fusion
// (megatron/core/fusions/fused_cross_entropy.py) the same steps run as three
// compiled kernels forward: the cast with the maximum (B + 4), the subtraction,
// exponent and sum written over the fp32 copy (4 + 4) and the normalization
// in place (4 + 4), B + 20; and one backward, which reads the softmax,
// writes it back as it updates it in place and writes the gradient in the
// model's dtype: 8 + B. It all-reduces twice, not three times (priced as
// three: 40 us or so). PyTorch's F.cross_entropy is
// log_softmax and nll_loss: a row longer than shared memory holds (a
// vocabulary over about 100,000 in 16 bits) is read three times, for its
// maximum, its sum of exponentials and the output it writes (4 values a
// logit, aten/src/ATen/native/cuda/SoftMax.cu, cunn_SoftMaxForward); the
// backward fills the gradient with zeros (nll_loss_backward, 1 written),
// reads it for its sum and again with the saved output to write the input's
// gradient (4): 5 values; the logits, the saved output and, in the
// backward, its gradient are held. `torch_fp32` casts the logits to fp32
// first (B read, 4 written) and its gradient back (4 read, B written).
// Transformer Engine's fused kernel (transformer_engine/pytorch/triton/
// cross_entropy.py: online_softmax_kernel, cross_entropy_backward_kernel)
// reads the logits once forward for the maximum and the sum together, and
// backward reads them again and writes the gradient over them: B, 2B, and
// only the logits held.
LossBytes cross_entropy_bytes(CrossEntropy loss, DType dtype) {
  const double b = dtype_bytes(dtype);
  switch (loss) {
    case CrossEntropy::kMegatron:
      return LossBytes{38, 14, b + 4};
    case CrossEntropy::kMegatronFused:
      return LossBytes{b + 20, 8 + b, b + 4};
    case CrossEntropy::kTorch:
      return LossBytes{4 * b, 5 * b, 3 * b};
    case CrossEntropy::kFused:
      return LossBytes{b, 2 * b, b};
    case CrossEntropy::kTorchFp32:
      break;
  }
  return LossBytes{b + 4 + 4 * 4, 5 * 4 + 4 + b, b + 2 * 4};
}

double fp8_operand_bytes(Fp8Recipe recipe, Fp8Input input, DType dtype, int shares,
                         bool transposes) {
  const double b = dtype_bytes(dtype);
  if (recipe == Fp8Recipe::kNone) return 0;
  // MXFP8: the quantizer reads the operand once and writes both copies
  // with their scales, whatever wrote the operand (Transformer Engine runs
  // a norm in bf16 and quantizes its output after it, unless cuDNN's norm
  // is asked for: pytorch/csrc/extensions/normalization.cpp); a gathered
  // operand's share is quantized, and the copies gathered as they are.
  if (recipe == Fp8Recipe::kMxfp8) return (b + 2 * kMxfp8CopyBytes) / shares;
  // Beyond the model's dtype: the cast's read and FP8 write, and with
  // current scaling a pass for the maximum first, except after a norm,
  // whose kernel takes it as it writes (Transformer Engine's
  // FUSED_NORM_AMAX_FP8); or with delayed scaling the norm's FP8 write
  // instead of b.
  const bool norm = input == Fp8Input::kNorm;
  double written = norm ? 1 - b : b + 1;
  if (recipe == Fp8Recipe::kCurrent) written = norm ? b + 1 : 2 * b + 1;
  // One GPU's whole operand: the cast writes its transpose beside it (1);
  // the norm's FP8 output is transposed later (1 read, 1 written). A
  // gathered operand's share is cast, the gathered whole transposed (2).
  if (shares > 1) return written / shares + (transposes ? 2 : 0);
  if (!transposes) return written;
  return written + (recipe == Fp8Recipe::kDelayed && norm ? 2 : 1);
}

int gradient_bytes(const TrainingSpec& training, DType dtype) {
  switch (training.gradient_dtype) {
    case GradientDType::kFp32:
      return 4;
    case GradientDType::kModelDType:
      return dtype_bytes(dtype);
    case GradientDType::kAuto:
      break;
  }
  return dtype == DType::kBf16 ? 4 : dtype_bytes(dtype);
}

PieceOps layer_ops(const OpShape& shape, const TokenSlice& slice) {
  const Dims dims = dims_of(shape, slice);
  PieceOps ops;
  PhaseBuilder forward(shape, dims, ops.forward);
  add_layer_forward(forward, shape.model);
  PhaseBuilder input_grad(shape, dims, ops.input_grad);
  const ColumnParallelPairs collectives = add_layer_input_grad(input_grad, shape.model);
  PhaseBuilder weight_grad(shape, dims, ops.weight_grad);
  const ColumnParallelPairs gemms = add_layer_weight_grad(weight_grad, shape.model);
  run_beside(shape, collectives.qkv, gemms.qkv, ops);
  run_beside(shape, collectives.mlp_up, gemms.mlp_up, ops);
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
  if (d.mask > 0) {
    forward.dropout("embedding dropout", forward.norm_bytes() * (2 + d.mask / B),
                    forward.norm_elements());
  }

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
  const LossBytes loss = cross_entropy_bytes(shape.cross_entropy, shape.model.dtype);
  PieceOps ops;
  PhaseBuilder forward(shape, d, ops.forward);
  forward.memory("final norm", 2 * forward.norm_bytes());
  forward.column_parallel_start("all-gather before the logits");
  forward.gemm("logits", d.tokens, d.vocab, d.hidden);
  forward.memory("cross-entropy", logits * loss.forward);
  for (int i = 0; i < kLossAllReduces; ++i) {
    forward.collective_op("cross-entropy all-reduce", CollectiveKind::kAllReduce, loss_reduce);
  }

  PhaseBuilder input_grad(shape, d, ops.input_grad);
  input_grad.memory("cross-entropy backward", logits * loss.backward);
  input_grad.gemm("logits input gradient", d.tokens, d.hidden, d.vocab);
  const int collective = input_grad.row_parallel_end("logits input-gradient all-reduce");
  input_grad.memory("final norm backward", 3 * input_grad.norm_bytes());

  PhaseBuilder weight_grad(shape, d, ops.weight_grad);
  run_beside(shape, collective,
             weight_grad.weight_gemm("logits weight gradient", d.vocab, d.hidden), ops);
  return ops;
}

}  // namespace ppsim
