// The GPU block (profiler/gpu_block.h) against the CPU block in float, on
// small shapes, in bf16 and fp16: forward output, input gradient, the KV
// cache and its gradient, weight gradients and the bytes held for backward.
// Both blocks get the same function: the CPU block runs with the parameters
// and inputs as the GPU holds them (rounded to 16 bits), so what is left is
// the GPU's rounding of its intermediate values. Skips, saying why, without
// a device.
#include "profiler/gpu_block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "profiler/gpt_block.h"
#include "profiler/gpu_block_io.h"

namespace ppsim {
// Test listings name the precision, not its bytes.
void PrintTo(DType dtype, std::ostream* os) { *os << to_string(dtype); }
}  // namespace ppsim

namespace ppsim::gpu {
namespace {

using kernels::BlockParams;
using kernels::Mat;
using kernels::TensorView;

// Tolerances, as max |gpu - cpu| / max |cpu| over a tensor. Inputs and
// weights are the same on both sides, so the difference is the rounding of
// the intermediates the GPU stores in 16 bits (LN outputs, Q/K/V, softmax,
// attention output, GeLU input and output, the gradients between layers):
// each is a relative error of at most u = 2^-8 (bf16) or 2^-11 (fp16), and a
// value passes through up to ~10 of them, partly cancelling, on its way to
// dx or a weight gradient; fp32 accumulation keeps the GEMMs' own error far
// below that. These kernels run on a CPU emulation (the CUDA code compiled
// as host code, cuBLAS replaced by a reference GEMM rounding as cuBLAS does)
// gave at most 8.0e-3 (bf16, 2.1 u) and 9.5e-4 (fp16, 1.9 u) on these
// shapes, the largest for the context's K gradient. The bounds leave 2.5x
// (bf16) and 3x (fp16) for the GPU's summation order and math library; an
// indexing error (of order 1) cannot pass.
constexpr double kBf16Tolerance = 2e-2;  // ~5 u
constexpr double kFp16Tolerance = 3e-3;  // ~6 u

#define ASSERT_OK(expr)                                      \
  do {                                                       \
    const ::ppsim::Status st_ = (expr);                      \
    ASSERT_TRUE(st_.ok()) << #expr << ": " << st_.message(); \
  } while (0)
#define PPSIM_CONCAT_INNER(a, b) a##b
#define PPSIM_CONCAT(a, b) PPSIM_CONCAT_INNER(a, b)
#define ASSIGN_OR_FAIL(lhs, expr) ASSIGN_OR_FAIL_IMPL(PPSIM_CONCAT(result_, __LINE__), lhs, expr)
#define ASSIGN_OR_FAIL_IMPL(result, lhs, expr)                         \
  auto result = (expr);                                                \
  ASSERT_TRUE(result.ok()) << #expr << ": " << result.error().message; \
  lhs = std::move(*result)

// Weights N(0, 1 / fan_in), so every layer's output is of order 1 and the
// softmax is far from uniform; biases and layer-norm gains and biases away
// from 0 and 1, so their gradients are tested too.
BlockParams<float> random_params(int hidden, int ffn, int heads, uint64_t seed) {
  BlockParams<float> p = kernels::zero_params<float>(hidden, ffn, heads);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> small(-0.3f, 0.3f);
  for (const TensorView<float>& t : p.tensors()) {
    for (int64_t i = 0; i < t.size; ++i) t.data[i] = small(rng);
  }
  p.ln1_gain.array() += 1.0f;
  p.ln2_gain.array() += 1.0f;
  for (auto [w, fan_in] : {std::pair{&p.w_qkv, hidden}, std::pair{&p.w_o, hidden},
                           std::pair{&p.w1, hidden}, std::pair{&p.w2, ffn}}) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
    for (Eigen::Index i = 0; i < w->size(); ++i) w->data()[i] = normal(rng) * scale;
  }
  return p;
}

Mat<float> random_matrix(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Mat<float> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

// "what i": a tensor's name in a loop.
std::string nth(const std::string& what, int i) { return what + " " + std::to_string(i); }

// max |gpu - cpu| relative to max |cpu|, which must not be ~0 (a zero
// reference would pass anything).
void expect_close(const std::string& what, const float* gpu, const float* cpu, int64_t size,
                  double tolerance) {
  double err = 0, ref = 0;
  for (int64_t i = 0; i < size; ++i) {
    err = std::max(err, std::abs(static_cast<double>(gpu[i]) - cpu[i]));
    ref = std::max(ref, std::abs(static_cast<double>(cpu[i])));
  }
  EXPECT_GT(ref, 1e-3) << what << ": the reference is ~0, the check would prove nothing";
  EXPECT_LE(err / ref, tolerance) << what << ": max abs error " << err << ", max |cpu| " << ref;
}

void expect_close(const std::string& what, const Mat<float>& gpu, const Mat<float>& cpu,
                  double tolerance) {
  ASSERT_EQ(gpu.rows(), cpu.rows()) << what;
  ASSERT_EQ(gpu.cols(), cpu.cols()) << what;
  expect_close(what, gpu.data(), cpu.data(), gpu.size(), tolerance);
}

void expect_grads_close(const BlockParams<float>& gpu, const BlockParams<float>& cpu,
                        double tolerance) {
  const std::vector<TensorView<float>> g = const_cast<BlockParams<float>&>(gpu).tensors();
  const std::vector<TensorView<float>> c = const_cast<BlockParams<float>&>(cpu).tensors();
  ASSERT_EQ(g.size(), c.size());
  for (size_t t = 0; t < g.size(); ++t) {
    ASSERT_EQ(g[t].size, c[t].size) << g[t].name;
    expect_close(std::string("grad ") + g[t].name, g[t].data, c[t].data, g[t].size, tolerance);
  }
}

class GpuBlockTest : public ::testing::TestWithParam<DType> {
 protected:
  // Shapes: hidden 64, 4 heads (d = 16), ffn 128, 2 sequences.
  static constexpr int kH = 64, kHeads = 4, kF = 128, kB = 2;

  void SetUp() override {
    std::string why;
    if (device_count(&why) == 0) GTEST_SKIP() << why;
    Result<std::unique_ptr<GpuContext>> ctx = GpuContext::create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.error().message;
    ctx_ = std::move(*ctx);
  }

  DType storage() const { return GetParam(); }
  double tolerance() const { return GetParam() == DType::kBf16 ? kBf16Tolerance : kFp16Tolerance; }
  // A random matrix as the GPU holds it (rounded), on both sides.
  void random_input(int64_t rows, std::mt19937_64& rng, Mat<float>* host, DeviceMatrix* device) {
    ASSIGN_OR_FAIL(*device, to_device(*ctx_, random_matrix(rows, kH, rng), storage()));
    ASSIGN_OR_FAIL(*host, to_host(*ctx_, *device));
  }
  void expect_device_close(const std::string& what, const DeviceMatrix& gpu,
                           const Mat<float>& cpu) {
    ASSIGN_OR_FAIL(const Mat<float> host, to_host(*ctx_, gpu));
    expect_close(what, host, cpu, tolerance());
  }

  std::unique_ptr<GpuContext> ctx_;  // declared first: destroyed after every buffer
};

TEST_P(GpuBlockTest, WholeSequencesMatchTheCpuBlock) {
  constexpr int kL = 16;
  const int64_t n = kB * kL;
  ASSIGN_OR_FAIL(const GpuBlockParams gp,
                 upload_params(*ctx_, random_params(kH, kF, kHeads, 1), storage()));
  ASSIGN_OR_FAIL(const BlockParams<float> p, download_params(*ctx_, gp));  // the rounded weights
  std::mt19937_64 rng(2);
  Mat<float> x, dy;
  DeviceMatrix gx, gdy;
  random_input(n, rng, &x, &gx);
  random_input(n, rng, &dy, &gdy);

  kernels::KvCache<float> kv(kB, kH, kL);
  kernels::KvGrad<float> kv_grad(kB, kH, kL);
  kernels::Saved<float> saved;
  BlockParams<float> grads = kernels::zero_params<float>(kH, kF, kHeads);
  const Mat<float> y = kernels::forward(p, x, &kv, &saved);
  const int64_t cpu_forward_bytes = saved.bytes();
  const Mat<float> dx = kernels::backward_input(p, dy, &kv, &kv_grad, &saved);
  const int64_t cpu_input_bytes = saved.bytes();
  kernels::backward_weight(p, &saved, &grads);

  ASSIGN_OR_FAIL(GpuKvCache gkv, GpuKvCache::create(*ctx_, kB, kH, kL, storage()));
  ASSIGN_OR_FAIL(GpuKvGrad gkv_grad, GpuKvGrad::create(*ctx_, kB, kH, kL));
  ASSIGN_OR_FAIL(GpuBlockGrads ggrads, zero_grads(*ctx_, kH, kF, kHeads));
  GpuSaved gsaved;
  DeviceMatrix gy, gdx;
  const SavedFigures figures = saved_figures({kB, kL, 0, kH, kF, kHeads}, storage());

  ASSERT_OK(forward(*ctx_, gp, gx, &gkv, &gsaved, &gy));
  EXPECT_EQ(gkv.length(), kL);
  EXPECT_EQ(gsaved.bytes(), figures.after_forward);
  EXPECT_EQ(gsaved.bytes(), cpu_forward_bytes / 2 + 4 * n);
  expect_device_close("y", gy, y);

  ASSERT_OK(backward_input(*ctx_, gp, gdy, &gkv, &gkv_grad, &gsaved, &gdx));
  EXPECT_EQ(gkv.length(), 0);
  EXPECT_EQ(gsaved.bytes(), figures.after_input());
  EXPECT_EQ(gsaved.bytes(), cpu_input_bytes / 2 + 8 * kH);
  expect_device_close("dx", gdx, dx);

  ASSERT_OK(backward_weight(*ctx_, gp, &gsaved, &ggrads));
  EXPECT_EQ(gsaved.bytes(), 0);
  ASSIGN_OR_FAIL(const BlockParams<float> gpu_grads, download_params(*ctx_, ggrads));
  expect_grads_close(gpu_grads, grads, tolerance());
  ASSERT_OK(ctx_->synchronize());
}

// Three slices of 6, 4 and 6 tokens: each attends to the K/V the earlier
// ones left in the cache. Backward runs in reverse: the last slice's I then
// W, the middle one's B, the first one's I then W; the gradient w.r.t. the
// context flows back through the KV gradient, where two later slices add
// into the first slice's rows.
TEST_P(GpuBlockTest, SlicesAttendToTheKvContext) {
  const std::vector<int> lengths = {6, 4, 6};
  const int slices = static_cast<int>(lengths.size()), seq = 16;
  ASSIGN_OR_FAIL(const GpuBlockParams gp,
                 upload_params(*ctx_, random_params(kH, kF, kHeads, 3), storage()));
  ASSIGN_OR_FAIL(const BlockParams<float> p, download_params(*ctx_, gp));
  std::mt19937_64 rng(4);
  std::vector<Mat<float>> x(slices), dy(slices);
  std::vector<DeviceMatrix> gx(slices), gdy(slices);
  for (int j = 0; j < slices; ++j) {
    random_input(kB * lengths[j], rng, &x[j], &gx[j]);
    random_input(kB * lengths[j], rng, &dy[j], &gdy[j]);
  }

  // The CPU block, recording what the GPU block must match along the way.
  kernels::KvCache<float> kv(kB, kH, seq);
  kernels::KvGrad<float> kv_grad(kB, kH, seq);
  std::vector<kernels::Saved<float>> saved(slices);
  BlockParams<float> grads = kernels::zero_params<float>(kH, kF, kHeads);
  std::vector<Mat<float>> y(slices), dx(slices);
  for (int j = 0; j < slices; ++j) y[j] = kernels::forward(p, x[j], &kv, &saved[j]);
  const int64_t cpu_last_forward_bytes = saved[2].bytes();
  const std::vector<Mat<float>> k_cache = {kv.k(0), kv.k(1)}, v_cache = {kv.v(0), kv.v(1)};
  dx[2] = kernels::backward_input(p, dy[2], &kv, &kv_grad, &saved[2]);
  // What the last slice left for the 10 tokens before it.
  const std::vector<Mat<float>> context_dk = {kv_grad.dk[0].topRows(10), kv_grad.dk[1].topRows(10)};
  const std::vector<Mat<float>> context_dv = {kv_grad.dv[0].topRows(10), kv_grad.dv[1].topRows(10)};
  kernels::backward_weight(p, &saved[2], &grads);
  dx[1] = kernels::backward(p, dy[1], &kv, &kv_grad, &saved[1], &grads);
  dx[0] = kernels::backward_input(p, dy[0], &kv, &kv_grad, &saved[0]);
  kernels::backward_weight(p, &saved[0], &grads);

  ASSIGN_OR_FAIL(GpuKvCache gkv, GpuKvCache::create(*ctx_, kB, kH, seq, storage()));
  ASSIGN_OR_FAIL(GpuKvGrad gkv_grad, GpuKvGrad::create(*ctx_, kB, kH, seq));
  ASSIGN_OR_FAIL(GpuBlockGrads ggrads, zero_grads(*ctx_, kH, kF, kHeads));
  std::vector<GpuSaved> gsaved(slices);
  std::vector<DeviceMatrix> gy(slices), gdx(slices);

  for (int j = 0; j < slices; ++j) {
    ASSERT_OK(forward(*ctx_, gp, gx[j], &gkv, &gsaved[j], &gy[j]));
    expect_device_close(nth("y", j), gy[j], y[j]);
  }
  EXPECT_EQ(gkv.length(), seq);
  EXPECT_EQ(gsaved[2].bytes(), saved_figures({kB, 6, 10, kH, kF, kHeads}, storage()).after_forward);
  EXPECT_EQ(gsaved[2].bytes(), cpu_last_forward_bytes / 2 + 4 * kB * 6);
  for (int i = 0; i < kB; ++i) {
    ASSIGN_OR_FAIL(const Mat<float> k, to_host(*ctx_, gkv.k(i), storage(), seq, kH));
    ASSIGN_OR_FAIL(const Mat<float> v, to_host(*ctx_, gkv.v(i), storage(), seq, kH));
    expect_close(nth("K cache, sequence", i), k, k_cache[i], tolerance());
    expect_close(nth("V cache, sequence", i), v, v_cache[i], tolerance());
  }

  ASSERT_OK(backward_input(*ctx_, gp, gdy[2], &gkv, &gkv_grad, &gsaved[2], &gdx[2]));
  EXPECT_EQ(gkv.length(), 10);
  for (int i = 0; i < kB; ++i) {
    ASSIGN_OR_FAIL(const Mat<float> dk, to_host(*ctx_, gkv_grad.dk(i), DType::kFp32, 10, kH));
    ASSIGN_OR_FAIL(const Mat<float> dv, to_host(*ctx_, gkv_grad.dv(i), DType::kFp32, 10, kH));
    expect_close(nth("context dK, sequence", i), dk, context_dk[i], tolerance());
    expect_close(nth("context dV, sequence", i), dv, context_dv[i], tolerance());
  }
  ASSERT_OK(backward_weight(*ctx_, gp, &gsaved[2], &ggrads));
  ASSERT_OK(backward(*ctx_, gp, gdy[1], &gkv, &gkv_grad, &gsaved[1], &ggrads, &gdx[1]));
  EXPECT_EQ(gkv.length(), 6);
  ASSERT_OK(backward_input(*ctx_, gp, gdy[0], &gkv, &gkv_grad, &gsaved[0], &gdx[0]));
  ASSERT_OK(backward_weight(*ctx_, gp, &gsaved[0], &ggrads));
  EXPECT_EQ(gkv.length(), 0);
  for (int j = 0; j < slices; ++j) {
    EXPECT_EQ(gsaved[j].bytes(), 0);
    expect_device_close(nth("dx", j), gdx[j], dx[j]);
  }
  ASSIGN_OR_FAIL(const BlockParams<float> gpu_grads, download_params(*ctx_, ggrads));
  expect_grads_close(gpu_grads, grads, tolerance());
  // Each slice's I consumed what later slices left: the KV gradient is zero again.
  for (int i = 0; i < kB; ++i) {
    ASSIGN_OR_FAIL(const Mat<float> dk, to_host(*ctx_, gkv_grad.dk(i), DType::kFp32, seq, kH));
    ASSIGN_OR_FAIL(const Mat<float> dv, to_host(*ctx_, gkv_grad.dv(i), DType::kFp32, seq, kH));
    EXPECT_EQ(dk.cwiseAbs().maxCoeff(), 0.0f);
    EXPECT_EQ(dv.cwiseAbs().maxCoeff(), 0.0f);
  }
}

TEST_P(GpuBlockTest, ParametersRoundTripThroughTheStorageType) {
  const BlockParams<float> p = random_params(kH, kF, kHeads, 5);
  ASSIGN_OR_FAIL(const GpuBlockParams gp, upload_params(*ctx_, p, storage()));
  ASSIGN_OR_FAIL(const BlockParams<float> back, download_params(*ctx_, gp));
  // Round to nearest: relative error at most u = 2^-8 (bf16) or 2^-11
  // (fp16), so at most u relative to the largest entry too.
  expect_grads_close(back, p, storage() == DType::kBf16 ? 1.0 / 256 : 1.0 / 2048);
}

TEST_P(GpuBlockTest, CudaErrorsComeBackNamingTheCall) {
  std::string why;
  const int devices = device_count(&why);
  Result<std::unique_ptr<GpuContext>> bad = GpuContext::create(devices);  // one past the last
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("cudaSetDevice"), std::string::npos) << bad.error().message;
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuBlockTest, ::testing::Values(DType::kBf16, DType::kFp16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(to_string(info.param));
                         });

}  // namespace
}  // namespace ppsim::gpu
