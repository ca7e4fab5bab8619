#include "profiler/cupti_records.h"

#include <cupti.h>
#include <fmt/format.h>

#include <type_traits>

namespace ppsim::gpu {
namespace {

// The record versions this toolkit's CUPTI writes. A toolkit with newer ones
// must be mapped here by hand (fields move between versions), so any other
// CUPTI API version stops the build instead of misreading records.
#if CUPTI_API_VERSION >= 130000 && CUPTI_API_VERSION < 140000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using PeerRecord = CUpti_ActivityMemcpyPtoP4;
using MemsetRecord = CUpti_ActivityMemset4;
#else
#error "ppsim: map this CUPTI version's activity record types in profiler/cupti_records.cc"
#endif

// The fields read, with the types the conversion assumes.
template <typename R>
constexpr bool has_timed_fields =
    std::is_same_v<decltype(R::start), uint64_t>&& std::is_same_v<decltype(R::end), uint64_t>&&
        std::is_same_v<decltype(R::deviceId), uint32_t>&& std::is_same_v<
            decltype(R::streamId), uint32_t>&& std::is_same_v<decltype(R::correlationId), uint32_t>;
static_assert(has_timed_fields<KernelRecord> && has_timed_fields<MemcpyRecord> &&
              has_timed_fields<PeerRecord> && has_timed_fields<MemsetRecord>);
static_assert(std::is_same_v<decltype(KernelRecord::name), const char*>);
static_assert(std::is_same_v<decltype(MemcpyRecord::bytes), uint64_t> &&
              std::is_same_v<decltype(PeerRecord::bytes), uint64_t> &&
              std::is_same_v<decltype(MemsetRecord::bytes), uint64_t>);
static_assert(std::is_same_v<decltype(CUpti_ActivityExternalCorrelation::externalId), uint64_t>);
static_assert(std::is_standard_layout_v<KernelRecord> && std::is_standard_layout_v<MemcpyRecord>);

CopyKind copy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return CopyKind::kHostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return CopyKind::kDeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return CopyKind::kDeviceToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return CopyKind::kHostToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return CopyKind::kPeer;
    default:
      return CopyKind::kOther;
  }
}

void convert(const CUpti_Activity* record, ActivityLog* log) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelRecord*>(record);
      log->add_kernel(KernelActivity{k->name != nullptr ? k->name : "", k->start, k->end,
                                     k->deviceId, k->streamId, k->correlationId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
      log->add_copy(CopyActivity{copy_kind(m->copyKind), m->bytes, m->start, m->end, m->deviceId,
                                 m->deviceId, m->streamId, m->correlationId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // between two devices
      const auto* m = reinterpret_cast<const PeerRecord*>(record);
      log->add_copy(CopyActivity{CopyKind::kPeer, m->bytes, m->start, m->end, m->srcDeviceId,
                                 m->dstDeviceId, m->streamId, m->correlationId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* s = reinterpret_cast<const MemsetRecord*>(record);
      log->add_set(
          SetActivity{s->bytes, s->start, s->end, s->deviceId, s->streamId, s->correlationId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      log->add_correlation(ExternalCorrelation{c->correlationId, c->externalId});
      return;
    }
    default:
      ++log->other;
  }
}

}  // namespace

Status read_activity_buffer(uint8_t* buffer, size_t valid_size, ActivityLog* log) {
  if (valid_size == 0) return {};  // CUPTI completes empty buffers too
  CUpti_Activity* record = nullptr;
  while (true) {
    const CUptiResult status = cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (status == CUPTI_ERROR_MAX_LIMIT_REACHED) return {};  // the end of the buffer
    if (status != CUPTI_SUCCESS) {
      const char* what = nullptr;
      cuptiGetResultString(status, &what);
      return Error{fmt::format("CUPTI activity buffer: {}", what != nullptr ? what : "error")};
    }
    convert(record, log);
  }
}

}  // namespace ppsim::gpu
