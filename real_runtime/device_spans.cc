#include "real_runtime/device_spans.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace ppsim::runtime {

Result<SpanAlignment> apply_device_spans(const std::vector<DeviceSpan>& spans,
                                         const std::vector<int>& device_of_rank,
                                         Timeline* timeline) {
  Timeline& t = *timeline;
  PPSIM_CHECK(static_cast<int>(device_of_rank.size()) == t.num_ranks);
  const int devices = *std::max_element(device_of_rank.begin(), device_of_rank.end()) + 1;
  std::vector<const DeviceSpan*> of_record(t.actions.size(), nullptr);
  for (const DeviceSpan& s : spans) {
    if (s.record < 0 || s.record >= static_cast<int64_t>(t.actions.size())) {
      return Error{fmt::format("device spans: record {} is not an action of the run ({} actions)",
                               s.record, t.actions.size())};
    }
    if (s.end_ns < s.start_ns) {
      return Error{
          fmt::format("device spans: the span of record {} ends before it starts", s.record)};
    }
    if (of_record[s.record] != nullptr) {
      return Error{fmt::format("device spans: record {} has two spans", s.record)};
    }
    of_record[s.record] = &s;
  }
  // Per device, the offsets d (span - bracket) that put every span inside its bracket.
  std::vector<Picos> lo(devices, std::numeric_limits<Picos>::min());
  std::vector<Picos> hi(devices, std::numeric_limits<Picos>::max());
  for (size_t i = 0; i < t.actions.size(); ++i) {
    if (of_record[i] == nullptr) continue;
    const ActionRecord& a = t.actions[i];
    const int d = device_of_rank[a.rank];
    lo[d] = std::max(lo[d], static_cast<Picos>(of_record[i]->end_ns) * 1000 - a.end);
    hi[d] = std::min(hi[d], static_cast<Picos>(of_record[i]->start_ns) * 1000 - a.start);
  }
  SpanAlignment out;
  out.offset.assign(devices, 0);
  out.uncertainty.assign(devices, 0);
  for (int d = 0; d < devices; ++d) {
    if (lo[d] == std::numeric_limits<Picos>::min()) continue;  // no span on this device
    if (lo[d] > hi[d]) {
      return Error{fmt::format(
          "device spans: no clock offset puts device {}'s spans inside their actions' host "
          "brackets (they miss by {:.1f} us)",
          d, picos_to_seconds(lo[d] - hi[d]) * 1e6)};
    }
    out.offset[d] = lo[d] + (hi[d] - lo[d]) / 2;
    out.uncertainty[d] = hi[d] - lo[d];
  }
  for (size_t i = 0; i < t.actions.size(); ++i) {
    ActionRecord& a = t.actions[i];
    if (of_record[i] != nullptr) {
      const Picos d = out.offset[device_of_rank[a.rank]];
      a.start = static_cast<Picos>(of_record[i]->start_ns) * 1000 - d;
      a.end = static_cast<Picos>(of_record[i]->end_ns) * 1000 - d;
      ++out.replaced;
    } else {
      ++out.missing;
    }
  }
  t.makespan = 0;
  for (const ActionRecord& a : t.actions) t.makespan = std::max(t.makespan, a.end);
  for (const EpilogueRecord& e : t.epilogue) t.makespan = std::max(t.makespan, e.end);
  return out;
}

}  // namespace ppsim::runtime
