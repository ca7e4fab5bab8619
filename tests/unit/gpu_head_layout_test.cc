// The GPU head's and green contexts' host-side arithmetic, which needs no
// device: the head's layout against the CPU head's tensors, packing, the
// loss's memory figures against the CPU head's LossSaved, and the size of
// an SM group. (The numerics are in tests/gpu/gpu_head_test.cc.)
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "profiler/gpt_head.h"
#include "profiler/gpu_block.h"
#include "profiler/gpu_head.h"

namespace ppsim::gpu {
namespace gpu_head_layout_test {
namespace {

using kernels::HeadParams;
using kernels::Mat;
using kernels::TensorView;

// vocab 50, hidden 24, max_seq 10: no size is a multiple of the alignment.
constexpr int kV = 50, kH = 24, kS = 10;

TEST(GpuHeadLayoutTest, FollowsTheCpuTensorsAlignedAndApart) {
  const HeadLayout layout = head_layout(kV, kH, kS, true, true);
  HeadParams<float> p = kernels::zero_head_params<float>(kV, kH, kS);
  const std::vector<TensorView<float>> tensors = p.tensors();
  ASSERT_EQ(static_cast<int>(tensors.size()), kNumHeadTensors);
  int64_t end = 0;
  for (int t = 0; t < kNumHeadTensors; ++t) {
    SCOPED_TRACE(tensors[t].name);
    EXPECT_EQ(std::string(head_tensor_name(t)), tensors[t].name);
    EXPECT_EQ(layout.size[t], tensors[t].size);
    EXPECT_EQ(layout.offset[t] % kParamAlign, 0);
    EXPECT_GE(layout.offset[t], end);                // no overlap
    EXPECT_LT(layout.offset[t], end + kParamAlign);  // no more padding than alignment needs
    end = layout.offset[t] + layout.size[t];
  }
  // tok_emb 50 x 24 = 1200 elements in 19 x 64 = 1216; pos_emb 240 in 256;
  // lnf_gain and lnf_bias 24 in 64 each; w_out 1200 in 1216.
  EXPECT_EQ(layout.offset[kPosEmb], 1216);
  EXPECT_EQ(layout.offset[kLnfGain], 1216 + 256);
  EXPECT_EQ(layout.offset[kLnfBias], 1472 + 64);
  EXPECT_EQ(layout.offset[kWOut], 1536 + 64);
  EXPECT_EQ(layout.total, 1600 + 1216);
  EXPECT_EQ(layout.vocab, kV);
  EXPECT_EQ(layout.hidden, kH);
  EXPECT_EQ(layout.max_seq, kS);
}

TEST(GpuHeadLayoutTest, EachEndKeepsOnlyItsTensors) {
  const HeadLayout first = head_layout(kV, kH, kS, true, false);
  EXPECT_TRUE(first.embedding);
  EXPECT_FALSE(first.loss);
  EXPECT_EQ(first.size[kTokEmb], kV * kH);
  EXPECT_EQ(first.size[kPosEmb], kS * kH);
  for (int t : {kLnfGain, kLnfBias, kWOut}) EXPECT_EQ(first.size[t], 0) << head_tensor_name(t);
  EXPECT_EQ(first.total, 1216 + 256);
  const HeadLayout last = head_layout(kV, kH, kS, false, true);
  EXPECT_EQ(last.size[kTokEmb], 0);
  EXPECT_EQ(last.size[kPosEmb], 0);
  EXPECT_EQ(last.offset[kLnfGain], 0);
  EXPECT_EQ(last.offset[kLnfBias], 64);
  EXPECT_EQ(last.offset[kWOut], 128);
  EXPECT_EQ(last.size[kWOut], kH * kV);
  EXPECT_EQ(last.total, 128 + 1216);
  // A middle stage keeps nothing.
  EXPECT_EQ(head_layout(kV, kH, kS, false, false).total, 0);
}

HeadParams<float> random_head(uint64_t seed) {
  HeadParams<float> p = kernels::zero_head_params<float>(kV, kH, kS);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const TensorView<float>& t : p.tensors()) {
    for (int64_t i = 0; i < t.size; ++i) t.data[i] = u(rng);
  }
  return p;
}

// Every value of every tensor the layout holds at its place, row-major; the
// rest (padding, tensors not held) zero.
void expect_packed(const std::vector<float>& packed, const HeadParams<float>& p,
                   const HeadLayout& layout) {
  ASSERT_EQ(static_cast<int64_t>(packed.size()), layout.total);
  std::vector<bool> placed(packed.size(), false);
  const std::vector<TensorView<float>> tensors = const_cast<HeadParams<float>&>(p).tensors();
  for (int t = 0; t < kNumHeadTensors; ++t) {
    SCOPED_TRACE(tensors[t].name);
    for (int64_t i = 0; i < layout.size[t]; ++i) {
      ASSERT_EQ(packed[layout.offset[t] + i], tensors[t].data[i]) << i;
      placed[layout.offset[t] + i] = true;
    }
  }
  for (size_t i = 0; i < packed.size(); ++i) {
    if (!placed[i]) {
      ASSERT_EQ(packed[i], 0.0f) << "padding at " << i;
    }
  }
}

TEST(GpuHeadLayoutTest, PackPlacesEveryValueOfTheTensorsHeld) {
  const HeadParams<float> p = random_head(3);
  const HeadLayout both = head_layout(kV, kH, kS, true, true);
  const std::vector<float> packed = pack_head(p, both);
  // Row-major: tok_emb(7, 5) is element 7 h + 5 of its slot, w_out(3, 41)
  // element 3 V + 41 of its.
  EXPECT_EQ(packed[both.offset[kTokEmb] + 7 * kH + 5], p.tok_emb(7, 5));
  EXPECT_EQ(packed[both.offset[kPosEmb] + 9 * kH + 23], p.pos_emb(9, 23));
  EXPECT_EQ(packed[both.offset[kWOut] + 3 * kV + 41], p.w_out(3, 41));
  EXPECT_EQ(packed[both.offset[kLnfBias] + 11], p.lnf_bias(11));
  expect_packed(packed, p, both);
  for (auto [embedding, loss] : {std::pair{true, false}, std::pair{false, true}}) {
    SCOPED_TRACE(embedding ? "embedding" : "loss");
    const HeadLayout layout = head_layout(kV, kH, kS, embedding, loss);
    expect_packed(pack_head(p, layout), p, layout);
  }
}

TEST(GpuHeadLayoutTest, LossFiguresByHand) {
  // n 3, h 4, V 10: targets 3 int32 (12 bytes); xhat 12 and the softmax 30
  // values in 16 bits (84 bytes); after F rstd, 3 floats (12); after I the
  // final norm's gain and bias gradients, 8 floats (32).
  const LossFigures bf16 = loss_figures(3, 4, 10, DType::kBf16);
  EXPECT_EQ(bf16.after_forward, 12 + 84 + 12);
  EXPECT_EQ(bf16.after_input, 12 + 84 + 32);
  const LossFigures fp16 = loss_figures(3, 4, 10, DType::kFp16);
  EXPECT_EQ(fp16.after_forward, bf16.after_forward);
  EXPECT_EQ(fp16.after_input, bf16.after_input);
  const GpuLossSaved empty;
  EXPECT_EQ(empty.bytes(), 0);
}

TEST(GpuHeadLayoutTest, LossFiguresAreTheCpuHeadsAtHalfWidth) {
  // A real CPU loss F and I, read through LossSaved<float>: the GPU keeps
  // xhat and the softmax at half width and the int32 targets, fp32 rstd
  // and LN gradients as they are.
  constexpr int64_t kN = 6;
  const HeadParams<float> p = kernels::init_head_params<float>(kV, kH, kS, 5);
  const Mat<float> y = Mat<float>::Random(kN, kH);
  const std::vector<int32_t> targets = {0, 7, 49, 3, 3, 12};
  kernels::LossSaved<float> saved;
  kernels::loss_forward(p, y, targets, 1.0f / kN, &saved);
  const LossFigures fig = loss_figures(kN, kH, kV, DType::kBf16);
  // cpu = 4 (n h + n V + n) + 4 n; gpu = 2 (n h + n V) + 4 n + 4 n.
  EXPECT_EQ(fig.after_forward, saved.bytes() / 2 + 4 * kN);
  kernels::loss_backward_input(p, &saved);
  // cpu = 4 (n h + n V + 2 h) + 4 n; gpu = 2 (n h + n V) + 8 h + 4 n.
  EXPECT_EQ(fig.after_input, saved.bytes() / 2 + 2 * kN + 4 * kH);
}

TEST(GpuHeadLayoutTest, TensorNames) {
  const std::vector<std::string> names = {"tok_emb", "pos_emb", "lnf_gain", "lnf_bias", "w_out"};
  for (int t = 0; t < kNumHeadTensors; ++t) EXPECT_EQ(head_tensor_name(t), names[t]);
}

// sms_per_group: device_sms / groups, rounded down to a multiple of the
// alignment, or 0 below the smallest partition.
TEST(SmsPerGroupTest, HopperSplitsInMultiplesOfEight) {
  // H200: 132 SMs, smallest partition 8, alignment 8.
  EXPECT_EQ(sms_per_group(132, 1, 8, 8), 128);  // 132 -> 128
  EXPECT_EQ(sms_per_group(132, 2, 8, 8), 64);   // 66 -> 64
  EXPECT_EQ(sms_per_group(132, 3, 8, 8), 40);   // 44 -> 40
  EXPECT_EQ(sms_per_group(132, 4, 8, 8), 32);   // 33 -> 32
  EXPECT_EQ(sms_per_group(132, 16, 8, 8), 8);   // 8.25 -> 8
  EXPECT_EQ(sms_per_group(132, 17, 8, 8), 0);   // 7.76 -> 0, below 8
}

TEST(SmsPerGroupTest, AmpereSplitsInMultiplesOfTwo) {
  // A100: 108 SMs, smallest partition 4, alignment 2.
  EXPECT_EQ(sms_per_group(108, 5, 4, 2), 20);  // 21.6 -> 20
  EXPECT_EQ(sms_per_group(108, 8, 4, 2), 12);  // 13.5 -> 12
  EXPECT_EQ(sms_per_group(108, 27, 4, 2), 4);  // exactly the smallest partition
  EXPECT_EQ(sms_per_group(108, 28, 4, 2), 0);  // 3.86 -> 2, below 4
  EXPECT_EQ(sms_per_group(10, 3, 2, 1), 3);    // alignment 1: plain division
  EXPECT_EQ(sms_per_group(0, 1, 0, 1), 0);     // nothing to split
}

}  // namespace
}  // namespace gpu_head_layout_test
}  // namespace ppsim::gpu
