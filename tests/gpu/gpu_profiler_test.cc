// The GPU profiler (profiler/gpu_profiler.h) on a device, at a tiny shape:
// every kind of every shape with a positive spread in order, the bytes
// GpuSaved's figures give, the links this machine has, and a profile that
// reads back. Skips, saying why, without a device.
#include "profiler/gpu_profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "profiler/gpu_block.h"
#include "sim/cost_profile.h"

namespace ppsim {
namespace {

TEST(GpuProfilerTest, TimesEveryKindAndFitsTheLinks) {
  std::string why;
  const int devices = gpu::device_count(&why);
  if (devices == 0) GTEST_SKIP() << why;
  // A vocabulary: the ends are not timed on the GPU, which is said.
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
  EXPECT_NE(p->provenance.tool.find("GPU"), std::string::npos) << p->provenance.tool;

  ASSERT_EQ(p->kernels.size(), r.shapes.size() * kKernelKinds.size());
  for (const auto& [tokens, context] : r.shapes) {
    for (std::string_view kind : kKernelKinds) {
      SCOPED_TRACE(std::string(kind) + " tokens " + std::to_string(tokens));
      const auto it =
          std::find_if(p->kernels.begin(), p->kernels.end(), [&](const KernelSample& k) {
            return k.kind == kind && k.tokens == tokens && k.context == context;
          });
      ASSERT_NE(it, p->kernels.end());
      EXPECT_EQ(it->part, kBlockPart);
      EXPECT_EQ(it->hidden, 64);  // the model's shape, looked up with tensor 2
      EXPECT_EQ(it->ffn, 128);
      EXPECT_EQ(it->heads, 4);
      EXPECT_EQ(it->tensor, 2);
      EXPECT_EQ(it->repetitions, 3);
      EXPECT_GT(it->min_s, 0);
      EXPECT_LE(it->min_s, it->median_s);
      EXPECT_LE(it->median_s, it->max_s);
      if (kind == "forward") {
        // What the block that ran (heads and ffn halved) holds.
        const gpu::SavedFigures figures =
            gpu::saved_figures(gpu::SliceShape{2, tokens, context, 64, 64, 2}, DType::kBf16);
        EXPECT_EQ(it->activation_bytes, figures.after_forward);
        EXPECT_EQ(it->weight_grad_bytes, figures.after_input());
      }
    }
  }

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
    return line.find("embedding and head: not timed") != std::string::npos;
  }));

  const Result<CostProfile> back = parse_profile(profile_to_yaml(*p), "gpu.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *p);
}

}  // namespace
}  // namespace ppsim
