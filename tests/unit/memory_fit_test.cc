// Fitting a preset's memory parameters to timed copies (sim/fit/memory_fit.h)
// and the sweep `ppsim profile-memory` times (profiler/memory_sweep.h), on
// the host: the model's time by hand, the CSV's errors, parameters recovered
// from timings the model made, the fit's bounds, and the sweep's CSV read
// back by the fit's reader.
#include "sim/fit/memory_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "profiler/memory_sweep.h"

namespace ppsim {
namespace memory_fit_test {
namespace {

using testing::HasSubstr;

std::string error_of(const std::string& csv) {
  const Result<MemoryTimings> t = parse_memory_timings(csv, "memory.csv");
  return t.ok() ? "" : t.error().message;
}

HardwareSpec gpu(double efficiency, double launch_us) {
  HardwareSpec hw;
  hw.hbm_bandwidth_gbps = 1000;
  hw.hbm_efficiency = efficiency;
  hw.kernel_launch_us = launch_us;
  return hw;
}

// 1 GB at half of 1000 GB/s is 2 ms, and the fixed 2 us beside it.
TEST(MemoryModel, IsTheStreamingTimePlusTheFixedTime) {
  EXPECT_NEAR(memory_model_seconds(gpu(0.5, 2), 1e9), 2.002e-3, 1e-12);
  EXPECT_NEAR(memory_model_seconds(gpu(1, 0), 5e5), 5e-7, 1e-18);
}

TEST(MemoryTimings, ReadsColumnsInAnyOrder) {
  const Result<MemoryTimings> t =
      parse_memory_timings("seconds,label,bytes\n1e-3,big,2147483648\n2e-6,,131072\n", "m.csv");
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].bytes, 2147483648.0);
  EXPECT_EQ(t->rows[0].seconds, 1e-3);
  EXPECT_EQ(t->rows[0].label, "big");
  EXPECT_EQ(t->rows[1].label, "0.125 MiB");
  EXPECT_EQ(t->rows[1].line, 3);
}

TEST(MemoryTimings, EveryErrorNamesTheFileLineAndColumn) {
  EXPECT_EQ(error_of("bytes\n1\n"),
            "memory.csv:1: missing column \"seconds\" (required: bytes, seconds)");
  EXPECT_EQ(error_of("bytes,seconds,size\n"),
            "memory.csv:1: unknown column \"size\"; the columns are bytes, seconds, label, source");
  EXPECT_EQ(error_of("bytes,seconds\n1,1\n1.5,1\n"),
            "memory.csv:3: bytes: expected a whole number from 1 to 1125899906842624, got \"1.5\"");
  EXPECT_EQ(error_of("bytes,seconds\n0,1\n"),
            "memory.csv:2: bytes: expected a whole number from 1 to 1125899906842624, got \"0\"");
  EXPECT_EQ(error_of("bytes,seconds\n1,-1\n"),
            "memory.csv:2: seconds: expected a number of seconds above 0, got \"-1\"");
  EXPECT_EQ(error_of("bytes,seconds\n"), "memory.csv: no timings below the header");
  EXPECT_THAT(error_of(""), HasSubstr("memory.csv: empty"));
}

// Copies of every size of the sweep, timed by `truth` within +-noise (a
// deterministic pattern).
MemoryTimings timings_of(const HardwareSpec& truth, double noise) {
  MemoryTimings t{"synthetic.csv", {}};
  int i = 0;
  for (const int64_t size : memory_sweep_sizes()) {
    MemoryTiming row;
    row.bytes = 2.0 * size;
    row.seconds = memory_model_seconds(truth, row.bytes) * (1 + noise * std::sin(1.7 * i++));
    t.rows.push_back(row);
  }
  return t;
}

TEST(MemoryFit, RecoversTheParametersTheTimingsWereMadeWith) {
  const Result<MemoryFitResult> fit =
      fit_memory_timings(gpu(0.51, 0), timings_of(gpu(0.87, 2.5), 0));
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_TRUE(fit->fixed_time_fitted);
  EXPECT_NEAR(fit->hardware.hbm_efficiency, 0.87, 1e-9);
  EXPECT_NEAR(fit->hardware.kernel_launch_us, 2.5, 1e-6);
  EXPECT_LT(fit->after_summary.max_abs, 1e-9);
  EXPECT_GT(fit->before_summary.mean_abs, 0.1);
}

// Least squares: the fit's sum of squared relative errors is at most that
// of the parameters the timings were made with, whose errors are the noise
// (within 3 %); so every fitted timing is within 3 % on average.
TEST(MemoryFit, NoisyTimingsFitNoWorseThanTheTruth) {
  const HardwareSpec truth = gpu(0.87, 2.5);
  const MemoryTimings timings = timings_of(truth, 0.03);
  const Result<MemoryFitResult> fit = fit_memory_timings(gpu(0.51, 0), timings);
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  double truth_squares = 0, fit_squares = 0;
  for (size_t i = 0; i < timings.rows.size(); ++i) {
    const double e =
        memory_model_seconds(truth, timings.rows[i].bytes) / timings.rows[i].seconds - 1;
    truth_squares += e * e;
    fit_squares += fit->after[i] * fit->after[i];
  }
  EXPECT_LE(fit_squares, truth_squares * (1 + 1e-9));
  EXPECT_LE(fit->after_summary.mean_abs, 0.03);
}

// One size cannot tell the fixed time from the streaming rate: the
// efficiency alone is fitted, to that copy's time exactly, beside the
// preset's fixed time.
TEST(MemoryFit, OneSizeFitsTheEfficiencyAndLeavesTheFixedTime) {
  MemoryTimings one{"one.csv", {{2, 1e9, 2.5e-3, "1 GB", ""}}};
  const Result<MemoryFitResult> fit = fit_memory_timings(gpu(0.51, 1), one);
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_FALSE(fit->fixed_time_fitted);
  EXPECT_EQ(fit->hardware.kernel_launch_us, 1);
  EXPECT_NEAR(fit->hardware.hbm_efficiency, 1e9 / (2.499e-3 * 1e12), 1e-9);
  EXPECT_THAT(format_memory_fit(one, gpu(0.51, 1), *fit, "test", "2026-12-05"),
              HasSubstr("not fitted: one size cannot tell it"));
}

// Copies faster than the datasheet allows (a wrong bandwidth in the preset)
// hold the efficiency at 1 and fit the fixed time beside it; copies whose
// time falls with size would need a negative fixed time, held at 0.
TEST(MemoryFit, KeepsEachParameterWithinItsRange) {
  const Result<MemoryFitResult> fast = fit_memory_timings(gpu(0.5, 0), timings_of(gpu(1.25, 3), 0));
  ASSERT_TRUE(fast.ok()) << fast.error().message;
  EXPECT_EQ(fast->hardware.hbm_efficiency, 1);
  EXPECT_GE(fast->hardware.kernel_launch_us, 0);
  EXPECT_LE(fast->hardware.kernel_launch_us, kMaxFittedKernelUs);
  MemoryTimings falling{"falling.csv", {{2, 1e6, 5e-7, "a", ""}, {3, 1e9, 2e-3, "b", ""}}};
  const Result<MemoryFitResult> fit = fit_memory_timings(gpu(0.5, 0), falling);
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_EQ(fit->hardware.kernel_launch_us, 0);
  EXPECT_GT(fit->hardware.hbm_efficiency, kMinFittedHbmEfficiency);
  EXPECT_FALSE(fit_memory_timings(gpu(0.5, 0), MemoryTimings{"none.csv", {}}).ok());
}

// Two sizes a byte apart, at one rate, are one size to the normal
// equations: the efficiency alone is fitted, a finite number.
TEST(MemoryFit, SizesTooCloseToTellTheFixedTimeFitTheEfficiencyAlone) {
  MemoryTimings close{"close.csv", {{2, 1e9, 1.25e-3, "a", ""}, {3, 1e9 + 1, 1.25e-3, "b", ""}}};
  const Result<MemoryFitResult> fit = fit_memory_timings(gpu(0.5, 0), close);
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_FALSE(fit->fixed_time_fitted);
  EXPECT_NEAR(fit->hardware.hbm_efficiency, 0.8, 1e-6);
  EXPECT_EQ(fit->hardware.kernel_launch_us, 0);
}

TEST(MemorySweep, DoublesFrom64KiBTo1GiB) {
  const std::vector<int64_t> sizes = memory_sweep_sizes();
  ASSERT_EQ(sizes.size(), 15u);
  EXPECT_EQ(sizes.front(), 65536);
  EXPECT_EQ(sizes.back(), int64_t{1} << 30);
  for (size_t i = 1; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], 2 * sizes[i - 1]);
}

// A copy reads and writes its buffer: the CSV's bytes are twice the size.
TEST(MemoryTimingsCsv, ReadsBackAsTheFitsInput) {
  const Result<MemoryTimings> t = parse_memory_timings(
      memory_timings_csv({65536, 1 << 30}, {3.5e-6, 8.1e-4}, "H200, \"copies\""), "memory.csv");
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].bytes, 131072);
  EXPECT_EQ(t->rows[1].bytes, 2147483648.0);
  EXPECT_EQ(t->rows[1].seconds, 8.1e-4);
  EXPECT_EQ(t->rows[0].label, "copy 64 KiB");
  EXPECT_EQ(t->rows[1].source, "H200, \"copies\"");
}

}  // namespace
}  // namespace memory_fit_test
}  // namespace ppsim
