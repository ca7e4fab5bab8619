// The GPU tracer on a real device: kernels, a memset and a copy bracketed as
// two actions come back attributed to them, in CUPTI mode and in the
// cudaEvent fallback. Skips, saying why, without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <vector>

#include "profiler/cupti_tracer.h"
#include "tests/gpu/test_kernels.h"

namespace ppsim::gpu {
namespace {

class TracerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (device_count(&why) == 0) GTEST_SKIP() << why;
  }
};

// Action 1: a memset and two kernels; action 2: a device-to-host copy.
Result<Trace> trace_two_actions() {
  constexpr int n = 1 << 20;
  float* data = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(float)) != cudaSuccess)
    return Error{"cudaMalloc failed"};
  std::vector<float> host(n);
  Result<std::unique_ptr<GpuTracer>> tracer = GpuTracer::start();
  if (!tracer) return tracer.error();
  if (Status st = (*tracer)->begin(1, nullptr); !st) return Error{st.message()};
  cudaMemsetAsync(data, 0, n * sizeof(float), nullptr);
  testing::launch_busy(data, n, 200, nullptr);
  testing::launch_busy(data, n, 200, nullptr);
  if (Status st = (*tracer)->end(1, nullptr); !st) return Error{st.message()};
  if (Status st = (*tracer)->begin(2, nullptr); !st) return Error{st.message()};
  cudaMemcpyAsync(host.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost, nullptr);
  if (Status st = (*tracer)->end(2, nullptr); !st) return Error{st.message()};
  Result<Trace> trace = (*tracer)->finish();
  cudaFree(data);
  return trace;
}

TEST_F(TracerTest, CuptiAttributesKernelsSetsAndCopiesToActions) {
  unsetenv("PPSIM_TRACER");
  Result<Trace> trace = trace_two_actions();
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  if (trace->mode == TraceMode::kEvents) {
    GTEST_SKIP() << "CUPTI unavailable here: " << trace->fallback_reason;
  }
  EXPECT_EQ(trace->log.dropped, 0u);
  EXPECT_EQ(trace->log.invalid, 0u);
  const std::vector<ActionSpan>& spans = trace->attribution.spans;
  ASSERT_EQ(spans.size(), 2u) << summary(trace->log);
  EXPECT_EQ(spans[0].external_id, 1u);
  EXPECT_EQ(spans[0].kernels, 2);
  EXPECT_EQ(spans[0].sets, 1);
  EXPECT_EQ(spans[1].external_id, 2u);
  EXPECT_EQ(spans[1].copies, 1);
  EXPECT_LT(spans[0].start_ns, spans[0].end_ns);
  EXPECT_LE(spans[0].end_ns, spans[1].start_ns);  // one stream: in order
}

TEST_F(TracerTest, EventFallbackGivesTheSameActionsInOrder) {
  setenv("PPSIM_TRACER", "events", 1);
  Result<Trace> trace = trace_two_actions();
  unsetenv("PPSIM_TRACER");
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  EXPECT_EQ(trace->mode, TraceMode::kEvents);
  EXPECT_EQ(trace->fallback_reason, "PPSIM_TRACER=events");
  const std::vector<ActionSpan>& spans = trace->attribution.spans;
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].external_id, 1u);
  EXPECT_LT(spans[0].start_ns, spans[0].end_ns);
  EXPECT_LE(spans[0].end_ns, spans[1].start_ns + 1000);  // float ms rounding
}

TEST_F(TracerTest, OneTracerAtATime) {
  Result<std::unique_ptr<GpuTracer>> first = GpuTracer::start();
  ASSERT_TRUE(first.ok()) << first.error().message;
  Result<std::unique_ptr<GpuTracer>> second = GpuTracer::start();
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("already running"), std::string::npos);
}

}  // namespace
}  // namespace ppsim::gpu
