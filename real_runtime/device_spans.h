// Device timing for a measured Timeline. A backend whose compute runs on a
// device (CUDA) brackets each action on the host: the record's start is
// taken before its work is issued, its end after the rank waited for the
// work. A GPU tracer (profiler/cupti_tracer.h) sees the work itself: the
// span from its first kernel's start to its last one's end, on the
// tracer's clock. This replaces each bracket by its span, moved onto the
// run's clock, so that launch and wake-up latencies are not counted as
// compute. Host code: no CUDA here.
//
// The two clocks differ by one unknown offset per device (the tracer has one
// clock per device). Every span lies inside its bracket under the true
// offset d (bracket_start <= span_start - d and span_end - d <= bracket_end),
// so d lies in [max(span_end - bracket_end), min(span_start -
// bracket_start)] over the device's actions; the middle of that interval is
// taken. The interval is narrow when some action's bracket is tight (a
// short wait before and after its work). Transfers and the epilogue keep
// their host times.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/status.h"
#include "sim/core/time.h"
#include "sim/core/timeline.h"

namespace ppsim::runtime {

// One action's device work: `record` indexes Timeline::actions; times are
// nanoseconds on the tracer's clock of the rank's device.
struct DeviceSpan {
  int64_t record = 0;
  uint64_t start_ns = 0, end_ns = 0;
};

struct SpanAlignment {
  int replaced = 0;  // actions given their span
  int missing = 0;   // actions without a span, which keep their bracket
  // Per device, the offset taken and the width of the interval it was
  // taken from (how well the clocks were pinned), picoseconds.
  std::vector<Picos> offset, uncertainty;
};

// Replaces the brackets of `timeline`'s actions by their spans;
// `device_of_rank[r]` is the device (clock) of rank r, devices numbered
// from 0. `makespan` follows. Errors, leaving the timeline as it
// was: a span of no action, two spans of one action, a span that ends
// before it starts, or no offset that puts a device's spans inside their
// brackets (they were not taken on that device, or not of these actions).
Result<SpanAlignment> apply_device_spans(const std::vector<DeviceSpan>& spans,
                                         const std::vector<int>& device_of_rank,
                                         Timeline* timeline);

}  // namespace ppsim::runtime
