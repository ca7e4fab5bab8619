// The GPU profiler (profiler/gpu_profiler.h) on a device, at a tiny shape:
// every kind of every shape, of the block, the embedding and the head, and
// the optimizer step, with a positive spread in order, the bytes the GPU
// block's and head's figures give, the links this machine has, a profile
// that reads back, and the kernels on a green context. Skips, saying why,
// without a device (or, for the green context, without green contexts).
#include "profiler/gpu_profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "profiler/gpu_block.h"
#include "profiler/gpu_head.h"
#include "sim/cost/cost_profile.h"

namespace ppsim {
namespace {

// The sample of `kind` and `part` at a shape, or null.
const KernelSample* find(const CostProfile& p, KernelKind kind, KernelPart part, int tokens,
                         int context) {
  const auto it = std::find_if(p.kernels.begin(), p.kernels.end(), [&](const KernelSample& k) {
    return k.kind == kind && k.part == part && k.tokens == tokens && k.context == context;
  });
  return it == p.kernels.end() ? nullptr : &*it;
}

void expect_spread(const KernelSample& k, int repetitions) {
  EXPECT_EQ(k.repetitions, repetitions);
  EXPECT_GT(k.min_s, 0);
  EXPECT_LE(k.min_s, k.median_s);
  EXPECT_LE(k.median_s, k.max_s);
}

TEST(GpuProfilerTest, TimesEveryKindAndFitsTheLinks) {
  std::string why;
  const int devices = gpu::device_count(&why);
  if (devices == 0) GTEST_SKIP() << why;
  const ProfileRequest r{.micro_batch = 2,
                         .hidden = 64,
                         .ffn = 128,
                         .heads = 4,
                         .vocab = 100,
                         .shapes = {{16, 0}, {8, 16}},
                         .warmup = 1,
                         .repetitions = 3};
  GpuProfileOptions o;
  o.tensor = 2;
  o.storage = DType::kBf16;
  o.link_sizes = {1 << 16, 1 << 18, 1 << 20, 1 << 22};
  std::vector<std::string> lines;
  const Result<CostProfile> p =
      profile_gpu(r, o, [&](const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_NE(p->provenance.tool.find("GPU: device 0 ("), std::string::npos) << p->provenance.tool;
  EXPECT_NE(p->provenance.tool.find(" SMs;"), std::string::npos) << p->provenance.tool;

  // Per shape the block's 5 kinds, the embedding's 3 and the head's 4; one step.
  ASSERT_EQ(p->kernels.size(), r.shapes.size() * (kLayerKernelKinds.size() + 3 + 4) + 1);
  for (const auto& [tokens, context] : r.shapes) {
    const int64_t n = 2 * tokens;
    for (const KernelKind kind : kLayerKernelKinds) {
      SCOPED_TRACE(std::string(to_string(kind)) + " tokens " + std::to_string(tokens));
      const KernelSample* k = find(*p, kind, KernelPart::kBlock, tokens, context);
      ASSERT_NE(k, nullptr);
      EXPECT_EQ(k->hidden, 64);  // the model's shape, looked up with tensor 2
      EXPECT_EQ(k->ffn, 128);
      EXPECT_EQ(k->heads, 4);
      EXPECT_EQ(k->tensor, 2);
      expect_spread(*k, 3);
      if (kind == KernelKind::kForward) {
        // What the block that ran (heads and ffn halved) holds.
        const gpu::SavedFigures figures =
            gpu::saved_figures(gpu::SliceShape{2, tokens, context, 64, 64, 2}, DType::kBf16);
        EXPECT_EQ(k->activation_bytes, figures.after_forward);
        EXPECT_EQ(k->weight_grad_bytes, figures.after_input());
      }
    }
    for (auto [part, kinds] :
         {std::pair{KernelPart::kEmbedding,
                    std::vector<KernelKind>{KernelKind::kForward, KernelKind::kBackward,
                                            KernelKind::kBackwardWeight}},
          std::pair{
              KernelPart::kHead,
              std::vector<KernelKind>{KernelKind::kForward, KernelKind::kBackward,
                                      KernelKind::kBackwardInput, KernelKind::kBackwardWeight}}}) {
      for (const KernelKind kind : kinds) {
        SCOPED_TRACE(std::string(to_string(part)) + " " + std::string(to_string(kind)) +
                     " tokens " + std::to_string(tokens));
        const KernelSample* k = find(*p, kind, part, tokens, context);
        ASSERT_NE(k, nullptr);
        EXPECT_EQ(k->hidden, 64);
        EXPECT_EQ(k->vocab, 100);
        EXPECT_EQ(k->ffn, 0);
        EXPECT_EQ(k->heads, 0);
        EXPECT_EQ(k->tensor, 2);
        expect_spread(*k, 3);
      }
    }
    // The embedding holds the input gradient (bf16) until W; the head GpuLossSaved.
    const KernelSample* embedding =
        find(*p, KernelKind::kForward, KernelPart::kEmbedding, tokens, context);
    ASSERT_NE(embedding, nullptr);
    EXPECT_EQ(embedding->activation_bytes, 0);
    EXPECT_EQ(embedding->weight_grad_bytes, n * 64 * 2);
    const KernelSample* head = find(*p, KernelKind::kForward, KernelPart::kHead, tokens, context);
    ASSERT_NE(head, nullptr);
    const gpu::LossFigures loss = gpu::loss_figures(n, 64, 100, DType::kBf16);
    EXPECT_EQ(head->activation_bytes, loss.after_forward);
    EXPECT_EQ(head->weight_grad_bytes, loss.after_input);
  }
  // The step, once, at the first shape: one block's weights.
  const KernelSample& step = p->kernels.back();
  EXPECT_EQ(step.kind, KernelKind::kOptimizerStep);
  EXPECT_EQ(step.part, KernelPart::kBlock);
  EXPECT_EQ(step.tokens, 16);
  EXPECT_EQ(step.context, 0);
  EXPECT_EQ(step.ffn, 128);
  EXPECT_EQ(step.tensor, 2);
  expect_spread(step, 3);

  std::vector<std::string_view> names;
  for (const LinkFit& l : p->links) {
    SCOPED_TRACE(l.name);
    names.push_back(l.name);
    EXPECT_GE(l.latency_s, 0);
    EXPECT_GT(l.bandwidth_Bps, 0);
    EXPECT_EQ(l.samples.size(), o.link_sizes.size());
  }
  EXPECT_EQ(names, gpu_link_names(devices, gpu_profiler_has_nccl()));
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("kernels on device 0 (") != std::string::npos &&
           line.find(", all ") != std::string::npos;
  }));

  const Result<CostProfile> back = parse_profile(profile_to_yaml(*p), "gpu.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *p);
}

TEST(GpuProfilerTest, RunsTheKernelsOnAGroupOfSms) {
  std::string why;
  if (gpu::device_count(&why) == 0) GTEST_SKIP() << why;
  if (Result<std::unique_ptr<gpu::SmPartition>> halves = gpu::SmPartition::create(0, 2);
      !halves.ok()) {
    GTEST_SKIP() << "no green contexts here: " << halves.error().message;
  }
  const ProfileRequest r{.micro_batch = 1,
                         .hidden = 64,
                         .ffn = 128,
                         .heads = 4,
                         .shapes = {{16, 0}},
                         .warmup = 1,
                         .repetitions = 2,
                         .link_sizes = {}};
  GpuProfileOptions o;
  o.sm_groups = 2;
  o.link_sizes = {};
  std::vector<std::string> lines;
  const Result<CostProfile> p =
      profile_gpu(r, o, [&](const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_NE(p->provenance.tool.find("green context of "), std::string::npos) << p->provenance.tool;
  EXPECT_EQ(p->kernels.size(), kLayerKernelKinds.size() + 1);
  EXPECT_TRUE(p->links.empty());
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("kernels on device 0 (") != std::string::npos &&
           line.find("green context of ") != std::string::npos;
  }));
}

}  // namespace
}  // namespace ppsim
