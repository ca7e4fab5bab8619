// The GPU block (profiler/gpu_block.h) against the CPU block in float, on
// small shapes, in bf16 and fp16: forward output, input gradient, the KV
// cache and its gradient, weight gradients and the bytes held for backward;
// the same forward on a green context (SmPartition), copy_matrix and the
// contexts' placement.
// Both blocks get the same function: the CPU block runs with the parameters
// and inputs as the GPU holds them (rounded to 16 bits), so what is left is
// the GPU's rounding of its intermediate values. Skips, saying why, without
// a device.
#include "profiler/gpu_block.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "profiler/gpt_block.h"
#include "profiler/gpu_block_io.h"
#include "tests/gpu/gpu_checks.h"

namespace ppsim::gpu {
namespace {

using kernels::BlockParams;
using kernels::Mat;
using kernels::TensorView;
using testing::expect_close;
using testing::random_matrix;

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

// "what i": a tensor's name in a loop.
std::string nth(const std::string& what, int i) { return what + " " + std::to_string(i); }

void expect_grads_close(const BlockParams<float>& gpu, const BlockParams<float>& cpu,
                        double tolerance) {
  testing::expect_tensors_close(const_cast<BlockParams<float>&>(gpu).tensors(),
                                const_cast<BlockParams<float>&>(cpu).tensors(), tolerance);
}

class GpuBlockTest : public testing::GpuTest {
 protected:
  // Shapes: hidden 64, 4 heads (d = 16), ffn 128, 2 sequences.
  static constexpr int kH = 64, kHeads = 4, kF = 128, kB = 2;

  double tolerance() const { return GetParam() == DType::kBf16 ? kBf16Tolerance : kFp16Tolerance; }
  // A random matrix as the GPU holds it (rounded), on both sides.
  void random_input(int64_t rows, std::mt19937_64& rng, Mat<float>* host, DeviceMatrix* device) {
    ASSIGN_OR_FAIL(*device, to_device(*ctx_, random_matrix(rows, kH, rng), storage()));
    ASSIGN_OR_FAIL(*host, to_host(*ctx_, *device));
  }
  void expect_device_close(const std::string& what, const DeviceMatrix& gpu,
                           const Mat<float>& cpu) {
    GpuTest::expect_device_close(what, gpu, cpu, tolerance());
  }
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

// A block's forward on a green context of one of two SM groups (an
// SmPartition of 2) against the same forward on the whole device: the same
// function. Only cuBLAS's choice of GEMM algorithm, which reads the SM
// count, may differ, and with it the fp32 summation order before a value
// is rounded to 16 bits: within the block's tolerance. A second thread,
// after make_current(), issues the same forward on the green context and
// gets the same bits (one context picks the same algorithms). Skips, saying
// why, where the driver has no green contexts.
TEST_P(GpuBlockTest, AGreenContextComputesWhatTheWholeDeviceDoes) {
  constexpr int kL = 16;
  const BlockParams<float> params = random_params(kH, kF, kHeads, 7);
  std::mt19937_64 rng(8);
  const Mat<float> x = random_matrix(kB * kL, kH, rng);
  // F on `ctx`, whose context is current, and its output on the host; the
  // buffers go before the context changes.
  const auto run_forward = [&](GpuContext& ctx, Mat<float>* y) {
    ASSIGN_OR_FAIL(const GpuBlockParams gp, upload_params(ctx, params, storage()));
    ASSIGN_OR_FAIL(const DeviceMatrix gx, to_device(ctx, x, storage()));
    ASSIGN_OR_FAIL(GpuKvCache kv, GpuKvCache::create(ctx, kB, kH, kL, storage()));
    GpuSaved saved;
    DeviceMatrix gy;
    ASSERT_OK(forward(ctx, gp, gx, &kv, &saved, &gy));
    ASSIGN_OR_FAIL(*y, to_host(ctx, gy));
  };
  Mat<float> whole, green, other_thread;
  run_forward(*ctx_, &whole);
  ASSERT_FALSE(HasFatalFailure());
  Result<std::unique_ptr<SmPartition>> partition = SmPartition::create(0, 2);
  if (!partition.ok()) GTEST_SKIP() << "no green contexts here: " << partition.error().message;
  const SmPartition& halves = **partition;
  EXPECT_EQ(halves.device(), 0);
  EXPECT_EQ(halves.groups(), 2);
  EXPECT_EQ(halves.device_sms(), ctx_->sm_count());
  EXPECT_GT(halves.sms_per_group(), 0);
  EXPECT_LE(2 * halves.sms_per_group(), halves.device_sms());
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const std::string device = "device 0 (" + std::string(prop.name) + "), ";
  EXPECT_EQ(ctx_->placement(), device + "all " + std::to_string(prop.multiProcessorCount) + " SMs");
  {
    ASSIGN_OR_FAIL(const std::unique_ptr<GpuContext> half, GpuContext::create(0, &halves, 1));
    EXPECT_EQ(half->sm_count(), halves.sms_per_group());
    EXPECT_EQ(half->placement(), device + "green context of " +
                                     std::to_string(halves.sms_per_group()) + " of " +
                                     std::to_string(halves.device_sms()) + " SMs");
    run_forward(*half, &green);
    std::thread thread([&] {
      ASSERT_OK(half->make_current());
      run_forward(*half, &other_thread);
    });
    thread.join();
  }  // destroying the green context leaves the device's primary context current
  ASSERT_OK(ctx_->make_current());
  expect_close("y on a green context", green, whole, tolerance());
  EXPECT_TRUE(other_thread == green) << "the same green context, another thread";
  // More groups than SMs: an error that says why.
  Result<std::unique_ptr<SmPartition>> too_many = SmPartition::create(0, halves.device_sms() + 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message.find("too few for"), std::string::npos)
      << too_many.error().message;
}

TEST_P(GpuBlockTest, CopyMatrixCopiesBitForBit) {
  std::mt19937_64 rng(9);
  Mat<float> host;
  DeviceMatrix m;
  random_input(5, rng, &host, &m);
  for (DType type : {storage(), DType::kFp32}) {
    SCOPED_TRACE(to_string(type));
    ASSIGN_OR_FAIL(const DeviceMatrix source, to_device(*ctx_, host, type));
    ASSIGN_OR_FAIL(const DeviceMatrix copy, copy_matrix(*ctx_, source));
    EXPECT_EQ(copy.rows, 5);
    EXPECT_EQ(copy.cols, kH);
    EXPECT_EQ(copy.type, type);
    EXPECT_NE(copy.data(), source.data());
    ASSIGN_OR_FAIL(const Mat<float> back, to_host(*ctx_, copy));
    EXPECT_TRUE(back == host);
  }
  ASSIGN_OR_FAIL(const DeviceMatrix empty, allocate_matrix(*ctx_, 0, kH, storage()));
  ASSIGN_OR_FAIL(const DeviceMatrix empty_copy, copy_matrix(*ctx_, empty));
  EXPECT_EQ(empty_copy.rows, 0);
  EXPECT_EQ(empty_copy.buffer.bytes(), 0);
  // From another device, where there is one: a peer copy.
  std::string why;
  if (device_count(&why) < 2) return;
  ASSIGN_OR_FAIL(const std::unique_ptr<GpuContext> other, GpuContext::create(1));
  ASSIGN_OR_FAIL(DeviceMatrix there, to_device(*other, host, storage()));
  ASSERT_OK(other->synchronize());
  ASSERT_OK(ctx_->make_current());
  ASSIGN_OR_FAIL(DeviceMatrix here, copy_matrix(*ctx_, there));
  ASSIGN_OR_FAIL(const Mat<float> back, to_host(*ctx_, here));
  EXPECT_TRUE(back == host);
  here.buffer.reset();
  ASSERT_OK(other->make_current());  // each buffer is freed with its device current
  there.buffer.reset();
  ASSERT_OK(ctx_->make_current());
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
