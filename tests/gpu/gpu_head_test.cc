// The GPU head (profiler/gpu_head.h) against the CPU head in float, in bf16
// and fp16: the embedding's F and W, the loss's F (the loss itself), I and
// W (adding into gradients already there), the bytes held, the parameters'
// round trip, and the SGD step against the same update on the host. Both
// heads get the same function: the CPU runs with the parameters and inputs
// as the GPU holds them (rounded to 16 bits). Skips, saying why, without a
// device.
#include "profiler/gpu_head.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "profiler/gpt_head.h"
#include "profiler/gpu_block_io.h"
#include "tests/gpu/gpu_checks.h"

namespace ppsim::gpu {
namespace {

using kernels::HeadParams;
using kernels::Mat;
using kernels::TensorView;
using testing::expect_close;
using testing::random_matrix;

// Tolerances, as max |gpu - cpu| / max |cpu| over a tensor; u = 2^-8 (bf16)
// or 2^-11 (fp16), the relative error of one rounding to the storage type.
//
// Embedding F: the CPU adds two rounded values in float, the GPU adds the
// same in fp32 and rounds the sum once: at most u / 2 of each element, so
// u (1/256, 1/2048) leaves 2x. Embedding W: the same fp32 values added in
// another order (atomics): a few fp32 roundings, 1e-5 leaves ~100x.
//
// The loss: the GPU rounds LN_f(y) before the logits GEMM (u / 2 each,
// random in sign over the h terms), so a logit moves by about u / 2 of its
// size; -log softmax[target] moves by at most twice the largest logit's
// change, a fraction of u of the per-token loss (~log V), hence u for the
// summed loss. The gradients pass through fewer 16-bit roundings than the
// block's (the softmax, softmax - onehot, xhat, LN_f(y) rebuilt, dy: 5 of
// them, partly cancelling): the block's bounds, ~5 u and ~6 u
// (gpu_block_test.cc), hold with margin. An indexing error is of order 1.
constexpr double kBf16U = 1.0 / 256, kFp16U = 1.0 / 2048;
constexpr double kBf16Tolerance = 2e-2;
constexpr double kFp16Tolerance = 3e-3;
constexpr double kFp32SumTolerance = 1e-5;

// Entries of order 1: embeddings N(0, 1), W_out N(0, 1 / h) so the logits
// are N(0, 1)-ish and the softmax far from uniform, the final norm's gain
// and bias away from 1 and 0.
HeadParams<float> random_head(int vocab, int hidden, int max_seq, uint64_t seed) {
  HeadParams<float> p = kernels::zero_head_params<float>(vocab, hidden, max_seq);
  std::mt19937_64 rng(seed);
  p.tok_emb = random_matrix(vocab, hidden, rng);
  p.pos_emb = random_matrix(max_seq, hidden, rng);
  p.w_out = random_matrix(hidden, vocab, rng) / std::sqrt(static_cast<float>(hidden));
  std::uniform_real_distribution<float> small(-0.3f, 0.3f);
  for (int j = 0; j < hidden; ++j) {
    p.lnf_gain(j) = 1.0f + small(rng);
    p.lnf_bias(j) = small(rng);
  }
  return p;
}

std::vector<int32_t> random_ids(int64_t count, int vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> ids(count);
  for (int32_t& i : ids) i = id(rng);
  return ids;
}

// Gradients already accumulated before a W: `p`'s shapes, each tensor
// uniform within its own largest value in `p` (at least 1e-2), so that W's
// additions are of the same size as what they add to.
HeadParams<float> like(const HeadParams<float>& p, uint64_t seed) {
  HeadParams<float> out = p;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const TensorView<float>& t : out.tensors()) {
    float most = 1e-2f;
    for (int64_t i = 0; i < t.size; ++i) most = std::max(most, std::abs(t.data[i]));
    for (int64_t i = 0; i < t.size; ++i) t.data[i] = most * u(rng);
  }
  return out;
}

HeadParams<float> sum(const HeadParams<float>& a, const HeadParams<float>& b) {
  HeadParams<float> out = a;
  out.tok_emb += b.tok_emb;
  out.pos_emb += b.pos_emb;
  out.lnf_gain += b.lnf_gain;
  out.lnf_bias += b.lnf_bias;
  out.w_out += b.w_out;
  return out;
}

class GpuHeadTest : public testing::GpuTest {
 protected:
  static constexpr int kV = 1000, kH = 64, kMaxSeq = 24, kB = 2;

  double u() const { return GetParam() == DType::kBf16 ? kBf16U : kFp16U; }
  double tolerance() const { return GetParam() == DType::kBf16 ? kBf16Tolerance : kFp16Tolerance; }
};

TEST_P(GpuHeadTest, ParametersRoundTripInTheLayoutsTensors) {
  const HeadParams<float> p = random_head(kV, kH, kMaxSeq, 1);
  for (auto [embedding, loss] :
       {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    SCOPED_TRACE(std::string(embedding ? "embedding " : "") + (loss ? "loss" : ""));
    const HeadLayout layout = head_layout(kV, kH, kMaxSeq, embedding, loss);
    ASSIGN_OR_FAIL(const GpuHeadParams gp, upload_head(*ctx_, p, layout, storage()));
    EXPECT_EQ(gp.data.bytes(), layout.total * dtype_bytes(storage()));
    ASSIGN_OR_FAIL(const HeadParams<float> back, download_head(*ctx_, gp));
    EXPECT_EQ(back.tok_emb.size(), embedding ? p.tok_emb.size() : 0);
    EXPECT_EQ(back.w_out.size(), loss ? p.w_out.size() : 0);
    // Round to nearest: at most u of each value.
    if (embedding) {
      expect_close("tok_emb", back.tok_emb, p.tok_emb, u());
      expect_close("pos_emb", back.pos_emb, p.pos_emb, u());
    }
    if (loss) {
      expect_close("lnf_gain", back.lnf_gain.data(), p.lnf_gain.data(), kH, u());
      expect_close("w_out", back.w_out, p.w_out, u());
    }
  }
}

// 8 tokens of 2 sequences at context 6 (positions 6 to 13), with an id
// repeated so that W adds several rows into one.
TEST_P(GpuHeadTest, EmbeddingMatchesTheCpuHead) {
  constexpr int kL = 8, kC = 6;
  const HeadLayout layout = head_layout(kV, kH, kMaxSeq, true, false);
  ASSIGN_OR_FAIL(const GpuHeadParams gp,
                 upload_head(*ctx_, random_head(kV, kH, kMaxSeq, 2), layout, storage()));
  ASSIGN_OR_FAIL(HeadParams<float> p, download_head(*ctx_, gp));  // the rounded weights
  std::mt19937_64 rng(3);
  std::vector<int32_t> ids = random_ids(kB * kL, kV, rng);
  ids[5] = ids[2] = ids[11];
  ASSIGN_OR_FAIL(const DeviceTokens tokens, upload_tokens(*ctx_, ids));
  EXPECT_EQ(tokens.count, kB * kL);

  const Mat<float> x = kernels::embed_forward(p, ids, kB, kC);
  DeviceMatrix gx;
  ASSERT_OK(embed_forward(*ctx_, gp, tokens, kB, kC, &gx));
  EXPECT_EQ(gx.type, storage());
  expect_device_close("x", gx, x, u());

  ASSIGN_OR_FAIL(const DeviceMatrix gdx,
                 to_device(*ctx_, random_matrix(kB * kL, kH, rng), storage()));
  ASSIGN_OR_FAIL(const Mat<float> dx, to_host(*ctx_, gdx));
  HeadParams<float> added = kernels::zero_head_params<float>(kV, kH, kMaxSeq);
  kernels::embed_backward_weight(ids, kB, kC, dx, &added);
  const HeadParams<float> start = like(added, 4);
  const HeadParams<float> grads = sum(start, added);
  ASSIGN_OR_FAIL(GpuHeadParams ggrads, upload_head(*ctx_, start, layout, DType::kFp32));
  ASSERT_OK(embed_backward_weight(*ctx_, tokens, kB, kC, gdx, &ggrads));
  ASSIGN_OR_FAIL(const HeadParams<float> gpu_grads, download_head(*ctx_, ggrads));
  expect_close("grad tok_emb", gpu_grads.tok_emb, grads.tok_emb, kFp32SumTolerance);
  expect_close("grad pos_emb", gpu_grads.pos_emb, grads.pos_emb, kFp32SumTolerance);
  ASSERT_OK(ctx_->synchronize());
}

TEST_P(GpuHeadTest, LossMatchesTheCpuHead) {
  constexpr int kL = 8;
  const int64_t n = kB * kL;
  const HeadLayout layout = head_layout(kV, kH, kMaxSeq, false, true);
  ASSIGN_OR_FAIL(const GpuHeadParams gp,
                 upload_head(*ctx_, random_head(kV, kH, kMaxSeq, 5), layout, storage()));
  ASSIGN_OR_FAIL(HeadParams<float> p, download_head(*ctx_, gp));
  std::mt19937_64 rng(6);
  ASSIGN_OR_FAIL(const DeviceMatrix gy, to_device(*ctx_, random_matrix(n, kH, rng), storage()));
  ASSIGN_OR_FAIL(const Mat<float> y, to_host(*ctx_, gy));
  const std::vector<int32_t> targets = random_ids(n, kV, rng);
  const float scale = 1.0f / static_cast<float>(n);

  // The CPU head; W's gradients then added to some already there.
  HeadParams<float> added = kernels::zero_head_params<float>(kV, kH, kMaxSeq);
  kernels::LossSaved<float> saved;
  const float loss = kernels::loss_forward(p, y, targets, scale, &saved);
  const int64_t cpu_forward_bytes = saved.bytes();
  const Mat<float> dy = kernels::loss_backward_input(p, &saved);
  const int64_t cpu_input_bytes = saved.bytes();
  kernels::loss_backward_weight(p, &saved, &added);
  const HeadParams<float> start = like(added, 7);
  const HeadParams<float> grads = sum(start, added);

  ASSIGN_OR_FAIL(GpuHeadParams ggrads, upload_head(*ctx_, start, layout, DType::kFp32));
  ASSIGN_OR_FAIL(DeviceTokens gtargets, upload_tokens(*ctx_, targets));
  GpuLossSaved gsaved;
  double gloss = 0;
  const LossFigures figures = loss_figures(n, kH, kV, storage());
  ASSERT_OK(loss_forward(*ctx_, gp, gy, std::move(gtargets), scale, &gsaved, &gloss));
  EXPECT_NEAR(gloss, loss, u() * std::abs(loss));
  EXPECT_GT(loss, 1.0f);  // ~log V: a loss the check can see move
  EXPECT_EQ(gsaved.bytes(), figures.after_forward);
  EXPECT_EQ(gsaved.bytes(), cpu_forward_bytes / 2 + 4 * n);

  DeviceMatrix gdy;
  ASSERT_OK(loss_backward_input(*ctx_, gp, &gsaved, &gdy));
  EXPECT_EQ(gsaved.bytes(), figures.after_input);
  EXPECT_EQ(gsaved.bytes(), cpu_input_bytes / 2 + 2 * n + 4 * kH);
  expect_device_close("dy", gdy, dy, tolerance());

  ASSERT_OK(loss_backward_weight(*ctx_, gp, &gsaved, &ggrads));
  EXPECT_EQ(gsaved.bytes(), 0);
  ASSIGN_OR_FAIL(const HeadParams<float> gpu_grads, download_head(*ctx_, ggrads));
  expect_close("grad lnf_gain", gpu_grads.lnf_gain.data(), grads.lnf_gain.data(), kH, tolerance());
  expect_close("grad lnf_bias", gpu_grads.lnf_bias.data(), grads.lnf_bias.data(), kH, tolerance());
  expect_close("grad w_out", gpu_grads.w_out, grads.w_out, tolerance());
  ASSERT_OK(ctx_->synchronize());
}

// master -= lr grads in fp32 (the GPU may fuse the multiply-add: one fp32
// rounding apart), params = master rounded (at most u / 2 of each value),
// grads = 0, over a count that is no multiple of a block of threads.
TEST_P(GpuHeadTest, SgdStepUpdatesTheMasterWeightsAndRoundsThem) {
  constexpr int64_t kCount = 1037;
  constexpr float kRate = 0.1f;
  std::mt19937_64 rng(8);
  const Mat<float> master = random_matrix(1, kCount, rng);
  const Mat<float> grads = random_matrix(1, kCount, rng);
  ASSIGN_OR_FAIL(const DeviceMatrix gmaster, to_device(*ctx_, master, DType::kFp32));
  ASSIGN_OR_FAIL(const DeviceMatrix ggrads, to_device(*ctx_, grads, DType::kFp32));
  ASSIGN_OR_FAIL(const DeviceMatrix gparams, allocate_matrix(*ctx_, 1, kCount, storage()));
  ASSERT_OK(sgd_step(*ctx_, kRate, kCount, static_cast<float*>(gmaster.data()),
                     static_cast<float*>(ggrads.data()), gparams.data(), storage()));
  const Mat<float> expected = master - kRate * grads;
  ASSIGN_OR_FAIL(const Mat<float> got, to_host(*ctx_, gmaster));
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_NEAR(got(0, i), expected(0, i), 2e-7 * (std::abs(master(0, i)) + 1)) << i;
  }
  ASSIGN_OR_FAIL(const Mat<float> params, to_host(*ctx_, gparams));
  for (int64_t i = 0; i < kCount; ++i) {
    // fp16 subnormals (below 2^-14) are spaced 2^-24 apart.
    ASSERT_LE(std::abs(params(0, i) - got(0, i)), u() / 2 * std::abs(got(0, i)) + 3e-8) << i;
  }
  ASSIGN_OR_FAIL(const Mat<float> zeroed, to_host(*ctx_, ggrads));
  EXPECT_EQ(zeroed.cwiseAbs().maxCoeff(), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuHeadTest, ::testing::Values(DType::kBf16, DType::kFp16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(to_string(info.param));
                         });

}  // namespace
}  // namespace ppsim::gpu
