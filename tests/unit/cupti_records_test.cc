// CUPTI activity buffers read into the project's plain structs, with
// synthetic buffers laid out as CUPTI writes them (records of this
// toolkit's versions, back to back) and walked by CUPTI's own
// cuptiActivityGetNextRecord: no GPU or driver needed. Built only with the
// CUDA toolkit.
#include "profiler/cupti_records.h"

#include <cupti.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace ppsim::gpu {
namespace cupti_records_test {
namespace {

class Buffer {
 public:
  template <typename R>
  void add(const R& record) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(R));
    std::memcpy(bytes_.data() + at, &record, sizeof(R));
  }
  Status read(ActivityLog* log) {
    // CUPTI requires 8-byte alignment; a vector<uint64_t> gives it.
    std::vector<uint64_t> aligned((bytes_.size() + 7) / 8);
    if (!bytes_.empty()) std::memcpy(aligned.data(), bytes_.data(), bytes_.size());
    return read_activity_buffer(reinterpret_cast<uint8_t*>(aligned.data()), bytes_.size(), log);
  }

 private:
  std::vector<uint8_t> bytes_;
};

CUpti_ActivityKernel10 kernel(const char* name, uint64_t start, uint64_t end,
                              uint32_t correlation) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start;
  k.end = end;
  k.deviceId = 1;
  k.streamId = 13;
  k.correlationId = correlation;
  return k;
}

TEST(CuptiRecords, KernelsCopiesSetsAndCorrelationsAreConverted) {
  Buffer buffer;
  std::string name = "ampere_sgemm_128x64_nn";
  buffer.add(kernel(name.c_str(), 1000, 2000, 7));
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.bytes = 1 << 20;
  copy.start = 2100;
  copy.end = 2600;
  copy.deviceId = 1;
  copy.streamId = 14;
  copy.correlationId = 8;
  buffer.add(copy);
  CUpti_ActivityMemcpyPtoP4 peer{};
  peer.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  peer.bytes = 4096;
  peer.start = 3000;
  peer.end = 3100;
  peer.srcDeviceId = 0;
  peer.dstDeviceId = 1;
  peer.correlationId = 9;
  buffer.add(peer);
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.bytes = 512;
  set.start = 900;
  set.end = 950;
  set.correlationId = 6;
  buffer.add(set);
  CUpti_ActivityExternalCorrelation corr{};
  corr.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  corr.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  corr.externalId = 42;
  corr.correlationId = 7;
  buffer.add(corr);

  ActivityLog log;
  ASSERT_TRUE(buffer.read(&log));
  name = "overwritten";  // the converted record owns its copy of the name
  ASSERT_EQ(log.kernels.size(), 1u);
  EXPECT_EQ(log.kernels[0].name, "ampere_sgemm_128x64_nn");
  EXPECT_EQ(log.kernels[0].start_ns, 1000u);
  EXPECT_EQ(log.kernels[0].end_ns, 2000u);
  EXPECT_EQ(log.kernels[0].device, 1u);
  EXPECT_EQ(log.kernels[0].stream, 13u);
  EXPECT_EQ(log.kernels[0].correlation, 7u);
  ASSERT_EQ(log.copies.size(), 2u);
  EXPECT_EQ(log.copies[0].kind, CopyKind::kHostToDevice);
  EXPECT_EQ(log.copies[0].bytes, 1u << 20);
  EXPECT_EQ(log.copies[0].stream, 14u);
  EXPECT_EQ(log.copies[1].kind, CopyKind::kPeer);
  EXPECT_EQ(log.copies[1].device, 0u);
  EXPECT_EQ(log.copies[1].peer_device, 1u);
  EXPECT_EQ(log.copies[1].end_ns - log.copies[1].start_ns, 100u);
  ASSERT_EQ(log.sets.size(), 1u);
  EXPECT_EQ(log.sets[0].bytes, 512u);
  ASSERT_EQ(log.correlations.size(), 1u);
  EXPECT_EQ(log.correlations[0].external_id, 42u);
  EXPECT_EQ(log.correlations[0].correlation, 7u);
  EXPECT_EQ(log.invalid, 0u);
  EXPECT_EQ(log.other, 0u);
  // And the kernel is attributed to action 42 through the correlation.
  const Attribution a = action_spans(log);
  ASSERT_EQ(a.spans.size(), 1u);
  EXPECT_EQ(a.spans[0].external_id, 42u);
  EXPECT_EQ(a.unattributed, 3);
}

TEST(CuptiRecords, ZeroTimestampsAreCountedInvalid) {
  Buffer buffer;
  buffer.add(kernel("a", 0, 2000, 1));
  buffer.add(kernel("b", 1000, 0, 2));
  buffer.add(kernel("c", 1000, 1500, 3));
  ActivityLog log;
  ASSERT_TRUE(buffer.read(&log));
  EXPECT_EQ(log.kernels.size(), 1u);
  EXPECT_EQ(log.kernels[0].name, "c");
  EXPECT_EQ(log.invalid, 2u);
}

TEST(CuptiRecords, KindsNotAskedForAreCountedAndSkipped) {
  Buffer buffer;
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.start = 5;
  api.end = 6;
  buffer.add(api);
  buffer.add(kernel("k", 10, 20, 1));
  ActivityLog log;
  ASSERT_TRUE(buffer.read(&log));
  EXPECT_EQ(log.other, 1u);
  EXPECT_EQ(log.kernels.size(), 1u);
}

TEST(CuptiRecords, AnEmptyBufferHoldsNothing) {
  Buffer buffer;
  ActivityLog log;
  ASSERT_TRUE(buffer.read(&log));
  EXPECT_TRUE(log.kernels.empty());
  EXPECT_EQ(summary(log), "0 kernels, 0 copies, 0 sets; 0 dropped, 0 invalid");
}

}  // namespace
}  // namespace cupti_records_test
}  // namespace ppsim::gpu
