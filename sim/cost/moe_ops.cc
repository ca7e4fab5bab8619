// The operations of a mixture-of-experts layer (moe_layer_ops): the
// attention half of a dense layer, then Megatron-Core's MoE block as its
// all-to-all token dispatcher runs it (docs/cost_model.md, "Mixture of
// experts").
#include <algorithm>

#include "sim/cost/layer_ops.h"
#include "sim/cost/layer_ops_internal.h"

namespace ppsim {

using namespace layer_ops_internal;

namespace {

// One MoE layer's routing on this GPU (Megatron-Core's all-to-all token
// dispatcher, expert tensor parallelism equal to t): it routes the
// `routed` tokens it normalizes to top_k experts each, receives `received`
// rows from its expert group, and with t > 1 gathers the tensor group's
// into `gathered` rows for its local experts, `mean` of them on each expert
// at the mean and `busiest` on the busiest. `source_permutes`: the GPU
// copies each token's row top_k times in expert order before the dispatch
// and sums them after the combine (the all-to-all dispatcher, or no expert
// parallelism); DeepEP's dispatch reads the tokens as they are and its
// combine sums the returning rows itself.
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
  bool source_permutes;
  bool dropless;  // no capacity: every token goes to its top_k experts
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
  r.source_permutes = shape.moe_dispatcher == MoeDispatcher::kAllToAll || shape.expert == 1;
  r.dropless = moe.capacity_factor <= 0;
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
  p.set_graph(CudaGraphScope::kMoeRouter);
  p.gemm("router", r.routed, r.experts, h);
  p.memory("router softmax and top-k", r.routed * r.experts * (B + kRouterFp32Bytes));
  p.set_graph(CudaGraphScope::kNone);
  // Each token's row copied top_k times in expert order.
  if (r.source_permutes) p.memory("token permutation", 2 * r.routed * r.top_k * h * B);
  // Dropless, the tokens each expert receives are counted on the GPU and
  // copied to the host, which sizes the exchange and the experts' GEMMs
  // with them: it waits for the GPU before the dispatch (Megatron-Core's
  // all-to-all dispatcher, sync point before_ep_alltoall; DeepEP's and
  // HybridEP's dispatch without a token budget).
  if (r.dropless) p.host_waits_for_last();
  around_local_experts(p, r, false, [&](double batch, double tokens) {
    add_mlp_core_forward(p, model, r.width, tokens, Fp8Input::kCast, batch);
  });
  // Each token's top_k rows read, weighted and summed into one.
  if (r.source_permutes) p.memory("token unpermutation", r.routed * h * B * (r.top_k + 1));
}

void add_moe_input_grad(PhaseBuilder& p, const ModelSpec& model, const Routing& r) {
  const double h = p.dims().hidden;
  const double B = p.dims().value_bytes;
  // The gradient copied to each of the top_k rows, and the rows read again
  // for the routing weights' gradient.
  if (r.source_permutes) {
    p.memory("token unpermutation backward", r.routed * h * B * (2 * r.top_k + 1));
  }
  around_local_experts(p, r, true, [&](double batch, double tokens) {
    add_mlp_core_input_grad(p, model, r.width, tokens, Fp8Input::kCast, batch);
  });
  if (r.source_permutes) p.memory("token permutation backward", r.routed * h * B * (r.top_k + 1));
  p.set_graph(CudaGraphScope::kMoeRouter);
  p.memory("router softmax and top-k backward", r.routed * r.experts * (B + kRouterFp32Bytes));
  p.gemm("router input gradient", r.routed, h, r.experts);
  p.set_graph(CudaGraphScope::kNone);
}

void add_moe_weight_grad(PhaseBuilder& p, const Routing& r) {
  const double h = p.dims().hidden;
  p.set_graph(CudaGraphScope::kMoeRouter);
  p.weight_gemm("router weight gradient", h, r.experts, r.routed, 1);
  p.set_graph(CudaGraphScope::kNone);
  for_local_experts(r, [&](double batch, double tokens) {
    p.linear_weight_gemm("expert up weight gradient", h, r.width.up, tokens, batch);
    p.linear_weight_gemm("expert down weight gradient", r.width.ffn, h, tokens, batch);
  });
}

// The chance that none of a token's k experts, k distinct of `experts`
// equally likely ones (balanced routing), is among `held` of them: C(experts
// - held, k) / C(experts, k).
double chance_of_none(double experts, double held, int k) {
  double chance = 1;
  for (int i = 0; i < k; ++i) {
    if (experts - held - i <= 0) return 0;
    chance *= (experts - held - i) / (experts - i);
  }
  return chance;
}

// The expected number of `holders`, each holding an equal part of
// `experts`, that hold at least one of a token's k experts.
double distinct_holders(double experts, double holders, int k) {
  return holders * (1 - chance_of_none(experts, experts / holders, k));
}

// The shared experts: one dense MLP of shared_experts x expert_ffn_hidden.
MlpWidth shared_width(const OpShape& shape) {
  const MoeSpec& moe = *shape.model.moe;
  return mlp_width(shape.model,
                   static_cast<double>(moe.shared_experts) * moe.expert_ffn_hidden / shape.tensor);
}

}  // namespace

ExchangeShares exchange_shares(const MoeSpec& moe, MoeDispatcher dispatcher, int members,
                               int per_node) {
  const double n = members;
  const double q = per_node;
  if (dispatcher == MoeDispatcher::kAllToAll) return {(q - 1) / n, (n - q) / n};
  const int k = moe.top_k;
  const double nodes = n / q;
  double experts = moe.experts;
  double gpus = n;
  double used_nodes = distinct_holders(experts, nodes, k);
  if (moe.max_nodes_per_token > 0 && moe.max_nodes_per_token < used_nodes) {
    // The router picks the nodes first, then the k experts among theirs.
    used_nodes = moe.max_nodes_per_token;
    experts *= used_nodes / nodes;
    gpus *= used_nodes / nodes;
  }
  const double used_gpus = distinct_holders(experts, gpus, k);
  return {used_gpus / k * (q - 1) / q, used_nodes * (nodes - 1) / nodes / k};
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
  // Megatron-Core's MoE layer norms the tokens once for the router and the
  // experts: the shared experts' up projection casts its input itself.
  if (shared) add_dense_mlp_forward(forward, shape.model, shared_width(shape), Fp8Input::kCast);
  forward.dropout("MLP bias-dropout-add", residual_bytes(forward), forward.norm_elements());

  PhaseBuilder input_grad(shape, dims, ops.input_grad);
  input_grad.memory("MLP dropout-add backward", dropout_add_backward_bytes(input_grad));
  const int shared_collective =
      shared ? add_dense_mlp_input_grad(input_grad, shape.model, shared_width(shape)) : -1;
  add_moe_input_grad(input_grad, shape.model, routing);
  const int qkv_collective = add_attention_input_grad(input_grad, shape.model);

  PhaseBuilder weight_grad(shape, dims, ops.weight_grad);
  const int qkv_gemm = add_attention_weight_grad(weight_grad, shape.model);
  add_moe_weight_grad(weight_grad, routing);
  const int shared_gemm = shared ? add_dense_mlp_weight_grad(weight_grad, shared_width(shape)) : -1;
  run_beside(shape, qkv_collective, qkv_gemm, ops);
  run_beside(shape, shared_collective, shared_gemm, ops);
  return ops;
}

}  // namespace ppsim
