// The GPU profiler's host-side logic, which needs no device: the options and
// the shape it times from a config, the links it measures with one or two
// devices, and its errors before any GPU work (profiler/gpu_profiler.h).
// Its measurements are in tests/gpu/gpu_profiler_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "profiler/gpu_profiler.h"
#include "sim/config/config.h"

namespace ppsim {
namespace gpu_profiler_host_test {
namespace {

using ::testing::HasSubstr;

Config gpt3_175b(const std::vector<ConfigOverride>& overrides = {}) {
  Result<Config> config =
      load_config(PPSIM_SOURCE_DIR "/configs/examples/gpt3-175b-64gpu.yaml", overrides);
  EXPECT_TRUE(config.ok()) << config.error().message;
  return *config;
}

ProfileRequest tiny_request() {
  return ProfileRequest{
      .micro_batch = 2, .hidden = 64, .ffn = 128, .heads = 4, .shapes = {{16, 0}}};
}

TEST(GpuProfilerHostTest, OptionsAndShapeOfAGpt3LayerAtTensor8) {
  const Config config = gpt3_175b();
  const Result<GpuProfileOptions> options = gpu_options_for(config);
  ASSERT_TRUE(options.ok()) << options.error().message;
  EXPECT_EQ(options->tensor, 8);
  EXPECT_EQ(options->storage, DType::kBf16);
  EXPECT_EQ(options->device, 0);
  const Result<ProfileRequest> request = request_for(config);
  ASSERT_TRUE(request.ok()) << request.error().message;
  ASSERT_EQ(request->shapes.size(), 1u);
  EXPECT_EQ(request->shapes[0], (std::pair{2048, 0}));
  // The per-GPU block: heads and ffn cut by t, the full hidden size.
  const Result<gpu::SliceShape> shape = gpu_timed_shape(*request, 8, 2048, 0);
  ASSERT_TRUE(shape.ok()) << shape.error().message;
  EXPECT_EQ(shape->batch, 1);
  EXPECT_EQ(shape->tokens, 2048);
  EXPECT_EQ(shape->context, 0);
  EXPECT_EQ(shape->hidden, 12288);
  EXPECT_EQ(shape->ffn, 49152 / 8);
  EXPECT_EQ(shape->heads, 96 / 8);
}

TEST(GpuProfilerHostTest, DtypeChoosesTheStorageAndFp32IsRefused) {
  const Result<GpuProfileOptions> fp16 = gpu_options_for(gpt3_175b({{"model.dtype", "fp16"}}));
  ASSERT_TRUE(fp16.ok()) << fp16.error().message;
  EXPECT_EQ(fp16->storage, DType::kFp16);
  const Result<GpuProfileOptions> fp32 = gpu_options_for(gpt3_175b({{"model.dtype", "fp32"}}));
  ASSERT_FALSE(fp32.ok());
  EXPECT_THAT(fp32.error().message, HasSubstr("bf16 or fp16"));
}

TEST(GpuProfilerHostTest, TensorDegreeMustDivideHeadsAndFfn) {
  const ProfileRequest r = tiny_request();
  const Result<gpu::SliceShape> one = gpu_timed_shape(r, 1, 8, 24);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->ffn, 128);
  EXPECT_EQ(one->heads, 4);
  EXPECT_EQ(one->context, 24);
  for (int t : {0, 3, 8}) {  // 8 divides ffn but not heads
    const Result<gpu::SliceShape> bad = gpu_timed_shape(r, t, 8, 0);
    ASSERT_FALSE(bad.ok()) << t;
    EXPECT_THAT(bad.error().message, HasSubstr("must divide heads 4 and ffn 128"));
  }
}

TEST(GpuProfilerHostTest, PeerAndNcclOnlyWithTwoDevices) {
  using V = std::vector<std::string_view>;
  const V local = {"device-to-device", "host-to-device", "device-to-host"};
  EXPECT_EQ(gpu_link_names(1, true), local);
  EXPECT_EQ(gpu_link_names(2, false), (V{local[0], local[1], local[2], "peer"}));
  EXPECT_EQ(gpu_link_names(4, true), (V{local[0], local[1], local[2], "peer", "nccl"}));
}

TEST(GpuProfilerHostTest, BadRequestsFailBeforeLookingForADevice) {
  ProfileRequest r = tiny_request();
  r.repetitions = 0;
  Result<CostProfile> p = profile_gpu(r, GpuProfileOptions{});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message, HasSubstr("one repetition"));
  GpuProfileOptions fp32;
  fp32.storage = DType::kFp32;
  p = profile_gpu(tiny_request(), fp32);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message, HasSubstr("bf16 or fp16"));
  GpuProfileOptions t3;
  t3.tensor = 3;
  p = profile_gpu(tiny_request(), t3);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message, HasSubstr("must divide"));
  GpuProfileOptions no_groups;
  no_groups.sm_groups = 0;
  p = profile_gpu(tiny_request(), no_groups);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message, HasSubstr("SM groups must be 1 or more, not 0"));
  ProfileRequest one_token = tiny_request();
  one_token.vocab = 1;  // the CPU head takes it; the GPU head's softmax needs two
  p = profile_gpu(one_token, GpuProfileOptions{});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message, HasSubstr("vocabulary of 2 or more"));
}

TEST(GpuProfilerHostTest, NoDeviceIsAnErrorWithTheReason) {
  std::string why;
  if (gpu::device_count(&why) > 0) GTEST_SKIP() << "a CUDA device is present";
  std::vector<std::string> lines;
  const Result<CostProfile> p = profile_gpu(
      tiny_request(), GpuProfileOptions{}, [&](const std::string& line) { lines.push_back(line); });
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, "profile: " + why);
  EXPECT_TRUE(lines.empty());
}

}  // namespace
}  // namespace gpu_profiler_host_test
}  // namespace ppsim
