// The host side of GPU tracing: which records are kept, and how kernels,
// copies and sets are attributed to schedule actions through CUPTI's
// external correlation records. Synthetic logs; no GPU, no CUDA.
#include "profiler/gpu_activity.h"

#include <gtest/gtest.h>

namespace ppsim::gpu {
namespace gpu_activity_test {
namespace {

TEST(GpuActivity, RecordsWithoutUsableTimestampsAreCountedNotKept) {
  ActivityLog log;
  log.add_kernel({"ok", 10, 20, 0, 1, 1});
  log.add_kernel({"no start", 0, 20, 0, 1, 2});
  log.add_kernel({"no end", 10, 0, 0, 1, 3});
  log.add_copy({CopyKind::kHostToDevice, 64, 30, 25, 0, 0, 1, 4});  // ends before it starts
  log.add_copy({CopyKind::kPeer, 64, 30, 30, 0, 1, 1, 5});          // zero length is fine
  log.add_set({16, 0, 0, 0, 1, 6});
  EXPECT_EQ(log.kernels.size(), 1u);
  EXPECT_EQ(log.copies.size(), 1u);
  EXPECT_EQ(log.sets.size(), 0u);
  EXPECT_EQ(log.invalid, 4u);
  EXPECT_EQ(summary(log), "1 kernels, 1 copies, 0 sets; 0 dropped, 4 invalid");
}

TEST(GpuActivity, MergeAddsRecordsAndCounts) {
  ActivityLog a, b;
  a.add_kernel({"k", 1, 2, 0, 0, 1});
  a.dropped = 3;
  b.add_kernel({"k", 3, 4, 0, 0, 2});
  b.add_correlation({2, 9});
  b.add_set({8, 5, 6, 0, 0, 2});
  b.dropped = 4;
  b.other = 1;
  b.invalid = 2;
  a.merge(std::move(b));
  EXPECT_EQ(a.kernels.size(), 2u);
  EXPECT_EQ(a.sets.size(), 1u);
  EXPECT_EQ(a.correlations.size(), 1u);
  EXPECT_EQ(a.dropped, 7u);
  EXPECT_EQ(a.other, 1u);
  EXPECT_EQ(a.invalid, 2u);
}

TEST(GpuActivity, SpansJoinKernelsCopiesAndSetsThroughCorrelationIds) {
  ActivityLog log;
  // Action 5 launched a memset (correlation 1) and two kernels (2, 3);
  // action 7 a kernel (4) and a copy (5). Correlation 6 has no action.
  for (auto [correlation, external] : {std::pair{1u, 5u}, {2u, 5u}, {3u, 5u}, {4u, 7u}, {5u, 7u}}) {
    log.add_correlation({correlation, external});
  }
  log.add_set({256, 100, 110, 0, 0, 1});
  log.add_kernel({"qkv", 120, 200, 0, 0, 2});
  log.add_kernel({"mlp", 210, 400, 0, 0, 3});
  log.add_kernel({"attn", 500, 650, 0, 0, 4});
  log.add_copy({CopyKind::kPeer, 4096, 660, 700, 0, 1, 0, 5});
  log.add_kernel({"stray", 800, 900, 0, 0, 6});
  const Attribution a = action_spans(log);
  ASSERT_EQ(a.spans.size(), 2u);
  EXPECT_EQ(a.spans[0].external_id, 5u);
  EXPECT_EQ(a.spans[0].start_ns, 100u);
  EXPECT_EQ(a.spans[0].end_ns, 400u);
  EXPECT_EQ(a.spans[0].kernels, 2);
  EXPECT_EQ(a.spans[0].sets, 1);
  EXPECT_EQ(a.spans[0].copies, 0);
  EXPECT_EQ(a.spans[1].external_id, 7u);
  EXPECT_EQ(a.spans[1].start_ns, 500u);
  EXPECT_EQ(a.spans[1].end_ns, 700u);
  EXPECT_EQ(a.spans[1].kernels, 1);
  EXPECT_EQ(a.spans[1].copies, 1);
  EXPECT_EQ(a.unattributed, 1);
  EXPECT_EQ(a.ambiguous, 0);
}

TEST(GpuActivity, RecordsArriveInAnyOrder) {
  // CUPTI completes buffers per stream and context: a later kernel may come
  // first, and its correlation record after it.
  ActivityLog log;
  log.add_kernel({"late", 300, 400, 0, 1, 2});
  log.add_kernel({"early", 100, 150, 0, 2, 1});
  log.add_correlation({2, 11});
  log.add_correlation({1, 11});
  const Attribution a = action_spans(log);
  ASSERT_EQ(a.spans.size(), 1u);
  EXPECT_EQ(a.spans[0].start_ns, 100u);
  EXPECT_EQ(a.spans[0].end_ns, 400u);
  EXPECT_EQ(a.spans[0].kernels, 2);
}

TEST(GpuActivity, ACorrelationIdTiedToTwoActionsGoesToTheFirstAndIsCounted) {
  ActivityLog log;
  log.add_correlation({1, 3});
  log.add_correlation({1, 4});
  log.add_kernel({"k", 10, 20, 0, 0, 1});
  const Attribution a = action_spans(log);
  ASSERT_EQ(a.spans.size(), 1u);
  EXPECT_EQ(a.spans[0].external_id, 3u);
  EXPECT_EQ(a.ambiguous, 1);
}

TEST(GpuActivity, CopyKindsHaveNames) {
  EXPECT_STREQ(to_string(CopyKind::kPeer), "peer");
  EXPECT_STREQ(to_string(CopyKind::kHostToDevice), "host-to-device");
  EXPECT_STREQ(to_string(CopyKind::kOther), "other");
}

}  // namespace
}  // namespace gpu_activity_test
}  // namespace ppsim::gpu
