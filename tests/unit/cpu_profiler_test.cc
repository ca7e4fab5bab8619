#include "profiler/cpu_profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/config/config.h"

namespace ppsim {
namespace cpu_profiler_test {
namespace {

using ::testing::HasSubstr;

ProfileRequest tiny() {
  ProfileRequest r;
  r.micro_batch = 2;
  r.hidden = 8;
  r.ffn = 16;
  r.heads = 2;
  r.shapes = {{4, 0}, {2, 2}};
  r.warmup = 1;
  r.repetitions = 3;
  // Large enough that the copy, not the hand-off's scheduling noise, sets the slope.
  r.link_sizes = {1 << 20, 1 << 22, 1 << 24};
  return r;
}

TEST(CpuProfiler, EveryKernelAtEveryShapeWithItsSpread) {
  int calls = 0;
  const Result<CostProfile> p = profile_cpu(tiny(), [&](int done, int total) {
    ++calls;
    EXPECT_EQ(total, 3);  // two shapes and the link sweep
    EXPECT_EQ(done, calls);
  });
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(calls, 3);
  // Every kind at both shapes, and one block's optimizer step once, at the first.
  ASSERT_EQ(p->kernels.size(), 2u * kLayerKernelKinds.size() + 1);
  EXPECT_EQ(p->kernels.back().kind, KernelKind::kOptimizerStep);
  EXPECT_EQ(p->kernels.back().tokens, 4);
  EXPECT_EQ(p->kernels.back().part, KernelPart::kBlock);
  for (const KernelSample& s : p->kernels) {
    EXPECT_EQ(s.repetitions, 3);
    EXPECT_LE(s.min_s, s.median_s);
    EXPECT_LE(s.median_s, s.max_s);
    EXPECT_GT(s.min_s, 0);
    EXPECT_EQ(s.micro_batch, 2);
    EXPECT_TRUE((s.tokens == 4 && s.context == 0) || (s.tokens == 2 && s.context == 2));
  }
  ASSERT_EQ(p->links.size(), 1u);
  EXPECT_EQ(p->links[0].samples.size(), 3u);
  EXPECT_GT(p->links[0].bandwidth_Bps, 0);
  EXPECT_FALSE(p->provenance.host.empty());
  EXPECT_FALSE(p->provenance.date.empty());
  // What the profiler writes, the simulator reads back unchanged.
  const Result<CostProfile> back = parse_profile(profile_to_yaml(*p), "p.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *p);
}

TEST(CpuProfiler, NoLinkSizesMeansKernelsOnly) {
  ProfileRequest r = tiny();
  r.link_sizes.clear();
  int last_total = 0;
  const Result<CostProfile> p = profile_cpu(r, [&](int, int total) { last_total = total; });
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(last_total, 2);  // the two shapes, no sweep
  EXPECT_EQ(p->kernels.size(), 2u * kLayerKernelKinds.size() + 1);
  EXPECT_TRUE(p->links.empty());
}

// With a vocabulary, the two ends of the model at every shape: the
// embedding's F, B and W (B is its W: its input is token ids) and the
// head's F, B, I and W, with the bytes each holds per microbatch as
// profiler/gpt_head.h counts them.
TEST(CpuProfiler, WithAVocabularyTheEmbeddingAndHeadToo) {
  ProfileRequest r = tiny();
  r.vocab = 11;
  const Result<CostProfile> p = profile_cpu(r);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->kernels.size(), 2u * (kLayerKernelKinds.size() + 3 + 4) + 1);
  for (const auto& [tokens, context] : r.shapes) {
    const int64_t n = 2 * tokens;  // micro_batch 2
    int embedding = 0, head = 0;
    for (const KernelSample& s : p->kernels) {
      if (s.tokens != tokens || s.context != context || s.part == KernelPart::kBlock) continue;
      EXPECT_EQ(s.vocab, 11);
      EXPECT_EQ(s.ffn, 0);
      EXPECT_EQ(s.heads, 0);
      EXPECT_LE(s.min_s, s.median_s);
      EXPECT_LE(s.median_s, s.max_s);
      ++(s.part == KernelPart::kEmbedding ? embedding : head);
      if (s.kind != KernelKind::kForward) continue;
      if (s.part == KernelPart::kEmbedding) {
        // Nothing after F; the input gradient, n x hidden fp32, from I to W.
        EXPECT_EQ(s.activation_bytes, 0);
        EXPECT_EQ(s.weight_grad_bytes, 4 * n * 8);
      } else {
        // After F: xhat (n h), the softmax (n V), rstd (n) and the int32
        // targets (n); after I: xhat, the logits' gradient in the softmax's
        // place, the final norm's gain and bias gradients (2 h), the targets.
        EXPECT_EQ(s.activation_bytes, 4 * (n * 8 + n * 11 + n) + 4 * n);
        EXPECT_EQ(s.weight_grad_bytes, 4 * (n * 8 + n * 11 + 2 * 8) + 4 * n);
      }
    }
    EXPECT_EQ(embedding, 3);
    EXPECT_EQ(head, 4);
  }
  const Result<CostProfile> back = parse_profile(profile_to_yaml(*p), "p.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *p);
}

TEST(CpuProfiler, RejectsImpossibleShapes) {
  ProfileRequest r = tiny();
  r.heads = 3;  // does not divide hidden 8
  Result<CostProfile> p = profile_cpu(r);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message, HasSubstr("heads dividing hidden"));
  EXPECT_THAT(p.error().message, HasSubstr("(hidden 8, ffn 16, heads 3, "));
  r = tiny();
  r.shapes.clear();
  p = profile_cpu(r);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message, HasSubstr("at least one shape"));
  EXPECT_THAT(p.error().message, HasSubstr(", 0 shapes, "));
}

// A token-level config asks for each slice at its own context.
TEST(CpuProfiler, RequestFollowsTheTokenSlices) {
  const Result<Config> config = parse_config(
      "model: {layers: 4, hidden: 64, heads: 4, seq_len: 96, vocab: 100}\n"
      "hardware: {preset: a100-80gb, gpus_per_node: 2, nodes: 1}\n"
      "parallel: {pipeline: 2}\ntraining: {global_batch: 4, micro_batch: 2}\n"
      "schedule: {kind: terapipe, slices: 3}\n",
      "t.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<ProfileRequest> r = request_for(*config);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->shapes, (std::vector<std::pair<int, int>>{{32, 0}, {32, 32}, {32, 64}}));
  EXPECT_EQ(r->micro_batch, 2);
  EXPECT_EQ(r->ffn, 256);
  EXPECT_EQ(r->vocab, 100);
}

// The profiler builds GPT-3 blocks only: a model with another block is
// refused at the key that makes it differ, before anything is timed.
TEST(CpuProfiler, RequestRefusesABlockItCannotBuild) {
  const Result<Config> config = parse_config(
      "model: {layers: 4, hidden: 64, heads: 4, kv_heads: 2, seq_len: 32, vocab: 100}\n"
      "hardware: {preset: a100-80gb, gpus_per_node: 2, nodes: 1}\n"
      "parallel: {pipeline: 2}\ntraining: {global_batch: 4}\n",
      "t.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<ProfileRequest> r = request_for(*config);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "t.yaml: model.kv_heads: ppsim profile cannot run this model: the profilers and the "
            "runtime build only the GPT-3 block (LayerNorm, multi-head attention of hidden / "
            "heads wide heads, a GeLU MLP, biases)");
}

}  // namespace
}  // namespace cpu_profiler_test
}  // namespace ppsim
