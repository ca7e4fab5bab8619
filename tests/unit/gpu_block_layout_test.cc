// The GPU block's host-side arithmetic, which needs no device: the parameter
// layout against the CPU block's tensors, packing, and the memory figures
// against the CPU block's Saved. (Its numerics are in tests/gpu/.)
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "profiler/block_kernels.h"
#include "profiler/gpt_block.h"
#include "profiler/gpu_block.h"
#include "profiler/gpu_block_io.h"

namespace ppsim::gpu {
namespace gpu_block_layout_test {
namespace {

using kernels::BlockParams;
using kernels::Mat;
using kernels::TensorView;

TEST(GpuBlockLayoutTest, FollowsTheCpuTensorsAlignedAndApart) {
  constexpr int kH = 24, kF = 40, kHeads = 3;  // sizes that are not multiples of the alignment
  const ParamLayout layout = param_layout(kH, kF, kHeads);
  BlockParams<float> p = kernels::zero_params<float>(kH, kF, kHeads);
  const std::vector<TensorView<float>> tensors = p.tensors();
  ASSERT_EQ(static_cast<int>(tensors.size()), kNumParamTensors);
  int64_t end = 0, sum = 0;
  for (int t = 0; t < kNumParamTensors; ++t) {
    SCOPED_TRACE(tensors[t].name);
    EXPECT_EQ(std::string(param_tensor_name(t)), tensors[t].name);
    EXPECT_EQ(layout.size[t], tensors[t].size);
    EXPECT_EQ(layout.offset[t] % kParamAlign, 0);
    EXPECT_GE(layout.offset[t], end);                // no overlap
    EXPECT_LT(layout.offset[t], end + kParamAlign);  // no more padding than alignment needs
    end = layout.offset[t] + layout.size[t];
    sum += layout.size[t];
  }
  EXPECT_EQ(sum, p.num_parameters());
  EXPECT_GE(layout.total, end);
  // w_qkv: 24 x 72 = 1728 elements (27 x 64) after ln1_gain and ln1_bias at 0 and 64.
  EXPECT_EQ(layout.offset[kLn1Bias], 64);
  EXPECT_EQ(layout.offset[kWQkv], 128);
  EXPECT_EQ(layout.offset[kBQkv], 128 + 1728);
}

TEST(GpuBlockLayoutTest, PackAndUnpackRoundTrip) {
  constexpr int kH = 8, kF = 12, kHeads = 2;
  BlockParams<float> p = kernels::init_params<float>(kH, kF, kHeads, 3);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const TensorView<float>& t : p.tensors()) {
    for (int64_t i = 0; i < t.size; ++i) t.data[i] = u(rng);
  }
  const ParamLayout layout = param_layout(kH, kF, kHeads);
  const std::vector<float> packed = pack_params(p, layout);
  ASSERT_EQ(static_cast<int64_t>(packed.size()), layout.total);
  // Row-major (in x out): w_qkv(1, 2) is element 1 * 3h + 2 of its slot.
  EXPECT_EQ(packed[layout.offset[kWQkv] + 1 * 3 * kH + 2], p.w_qkv(1, 2));
  EXPECT_EQ(packed[layout.offset[kW2] + 5 * kH + 7], p.w2(5, 7));
  EXPECT_EQ(packed[layout.offset[kB2] + 3], p.b2(3));
  // Padding stays zero.
  EXPECT_EQ(packed[layout.offset[kLn1Gain] + kH], 0.0f);
  const BlockParams<float> back = unpack_params(packed, layout);
  std::vector<TensorView<float>> a = p.tensors();
  std::vector<TensorView<float>> b = const_cast<BlockParams<float>&>(back).tensors();
  for (int t = 0; t < kNumParamTensors; ++t) {
    SCOPED_TRACE(a[t].name);
    ASSERT_EQ(a[t].size, b[t].size);
    for (int64_t i = 0; i < a[t].size; ++i) ASSERT_EQ(a[t].data[i], b[t].data[i]);
  }
}

TEST(GpuBlockLayoutTest, SavedFiguresByHand) {
  // b 1, l 2, c 1 (t 3), h 4, f 8, a 2: n = 2.
  const SliceShape s{1, 2, 1, 4, 8, 2};
  const SavedFigures bf16 = saved_figures(s, DType::kBf16);
  // 16-bit: xhat1, xhat2, q, o (4 x 8) + u 16 + probs 1*2*2*3 = 12 + K/V 16 =
  // 76 values, 152 bytes; rstd1, rstd2: 4 floats, 16 bytes.
  EXPECT_EQ(bf16.after_forward, 168);
  EXPECT_EQ(bf16.weight_grad, 2 * (3 * 8 + 16));
  // d_qkv 24, d_h 8, dy 8, du 16 values; LN grads 16 floats.
  EXPECT_EQ(bf16.grad_stash, 2 * 56 + 64);
  EXPECT_EQ(bf16.after_input(), 80 + 176);
  const SavedFigures fp16 = saved_figures(s, DType::kFp16);
  EXPECT_EQ(fp16.after_forward, bf16.after_forward);
  EXPECT_EQ(fp16.after_input(), bf16.after_input());
}

TEST(GpuBlockLayoutTest, SavedFiguresAreTheCpuBlocksAtHalfWidth) {
  // A real CPU forward and I of a slice at a context, read through Saved<float>.
  constexpr int kB = 2, kL = 3, kC = 2, kH = 8, kF = 16, kHeads = 2;
  const BlockParams<float> p = kernels::init_params<float>(kH, kF, kHeads, 11);
  kernels::KvCache<float> kv(kB, kH, kC + kL);
  kernels::KvGrad<float> kv_grad(kB, kH, kC + kL);
  kernels::Saved<float> saved;
  kernels::forward(p, Mat<float>::Random(kB * kC, kH).eval(), &kv, &saved);  // the context
  kernels::forward(p, Mat<float>::Random(kB * kL, kH).eval(), &kv, &saved);
  const SliceShape s{kB, kL, kC, kH, kF, kHeads};
  const SavedFigures fig = saved_figures(s, DType::kBf16);
  const int64_t n = kB * kL;
  EXPECT_EQ(fig.after_forward, saved.bytes() / 2 + 4 * n);
  kernels::backward_input(p, Mat<float>::Random(kB * kL, kH).eval(), &kv, &kv_grad, &saved);
  EXPECT_EQ(fig.weight_grad, saved.weight_grad_bytes() / 2);
  EXPECT_EQ(fig.grad_stash, saved.grad_stash_bytes() / 2 + 8 * kH);
  EXPECT_EQ(fig.after_input(), saved.bytes() / 2 + 8 * kH);
}

TEST(GpuBlockLayoutTest, StorageTypesAndConstants) {
  EXPECT_TRUE(is_storage_type(DType::kBf16));
  EXPECT_TRUE(is_storage_type(DType::kFp16));
  EXPECT_FALSE(is_storage_type(DType::kFp32));
  EXPECT_EQ(kGpuLayerNormEps, static_cast<float>(kernels::kLayerNormEps));
  const GpuSaved empty;
  EXPECT_EQ(empty.bytes(), 0);
}

}  // namespace
}  // namespace gpu_block_layout_test
}  // namespace ppsim::gpu
