// Shared by the cost model's tests: model, hardware and config builders
// whose figures are easy to work by hand.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "sim/cost/cost_model.h"

namespace ppsim::cost_model_test {

// GPT-3 175B (Brown et al. 2020): h = 12288, a = 96, s = 2048, ffn = 4h.
inline ModelSpec gpt3(int layers) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = 12288;
  m.ffn_hidden = 4 * 12288;
  m.heads = 96;
  m.seq_len = 2048;
  m.vocab = 51200;
  m.dtype = DType::kBf16;
  return m;
}

// Small enough for every figure to be worked by hand: h = 8, ffn = 32, s = 4,
// V = 16, so one layer has 12 * 64 + 13 * 8 = 872 parameters.
inline ModelSpec tiny(int layers) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = 8;
  m.ffn_hidden = 32;
  m.heads = 2;
  m.seq_len = 4;
  m.vocab = 16;
  return m;
}

// The Llama-style block both MoE models below use: SwiGLU, RMSNorm, rotary
// positions, untied embeddings, flash attention, no biases, no dropout.
inline ModelSpec llama_block() {
  ModelSpec m;
  m.mlp = Mlp::kSwiglu;
  m.norm = Norm::kRmsNorm;
  m.positions = Positions::kRotary;
  m.attention = Attention::kFlash;
  m.tie_embeddings = false;
  m.bias = false;
  m.dropout = 0;
  return m;
}

// Mixtral 8x7B (Jiang et al. 2024, Table 1) at s = 4096: h 4096, 32 heads,
// 8 KV heads, 8 SwiGLU experts of 14336, top 2.
inline ModelSpec mixtral_8x7b() {
  ModelSpec m = llama_block();
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.seq_len = 4096;
  m.vocab = 32000;
  m.moe = MoeSpec{.experts = 8, .top_k = 2, .expert_ffn_hidden = 14336};
  return m;
}

// DeepSeek-V3 (DeepSeek-AI 2024, section 4.2; its config.json) at s = 4096:
// h 7168, 128 heads, multi-head latent attention (query latent 1536, key-
// value latent 512, per-head widths 128 + 64 and 128), 3 dense SwiGLU layers
// of 18432, then 58 MoE layers of 256 routed experts of 2048, top 8, and a
// shared one.
inline ModelSpec deepseek_v3() {
  ModelSpec m = llama_block();
  m.layers = 61;
  m.hidden = 7168;
  m.ffn_hidden = 18432;
  m.heads = 128;
  m.kv_heads = 128;
  m.seq_len = 4096;
  m.vocab = 129280;
  m.mla = MlaSpec{.q_lora_rank = 1536,
                  .kv_lora_rank = 512,
                  .qk_nope_head_dim = 128,
                  .qk_rope_head_dim = 64,
                  .v_head_dim = 128};
  m.moe = MoeSpec{.experts = 256,
                  .top_k = 8,
                  .expert_ffn_hidden = 2048,
                  .shared_experts = 1,
                  .dense_layers = 3};
  return m;
}

// Round numbers: GEMMs at exactly 100 TFLOP/s whatever their size, HBM at
// 1e12 B/s, NVLink 1 us + 100 GB/s, network 5 us + 10 GB/s.
inline HardwareSpec round_hardware(int gpus_per_node, int nodes) {
  HardwareSpec hw;
  hw.name = "round";
  hw.peak_tflops_bf16 = 100;
  hw.max_gemm_efficiency = 1.0;
  hw.hbm_bandwidth_gbps = 1000;
  hw.intra_node_bandwidth_gbps = 100;
  hw.intra_node_latency_us = 1;
  hw.inter_node_bandwidth_gbps = 10;
  hw.inter_node_latency_us = 5;
  hw.gpus_per_node = gpus_per_node;
  hw.nodes = nodes;
  return hw;
}

inline Config make_config(std::optional<ModelSpec> model, int p, int t, int d,
                          std::optional<HardwareSpec> hw = std::nullopt) {
  Config c;
  c.model = model;
  c.hardware = hw;
  c.parallel.pipeline = p;
  c.parallel.tensor = t;
  c.parallel.data = d;
  c.training.global_batch = 8 * d;
  return c;
}

inline CostTable build_ok(const Config& config, const std::vector<int>& slice_lengths = {}) {
  Result<CostTable> table = build_cost_table(
      config, interleaved_stage_rank(config.num_stages(), config.parallel.pipeline), slice_lengths);
  EXPECT_TRUE(table.ok()) << (table.ok() ? "" : table.error().message);
  return table.ok() ? *table : CostTable{};
}

// One GPT-3 layer per stage, p = 3, t = 1, on round hardware: stage 1 holds
// only a layer, stage 0 adds the embedding, stage 2 the logits and loss.
inline Config gpt3_three_stages(Recompute recompute) {
  Config c = make_config(gpt3(3), 3, 1, 1, round_hardware(8, 1));
  c.training.recompute = recompute;
  return c;
}

}  // namespace ppsim::cost_model_test
