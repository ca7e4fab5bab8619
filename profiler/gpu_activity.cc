#include "profiler/gpu_activity.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <unordered_map>

namespace ppsim::gpu {
namespace {

bool usable(uint64_t start, uint64_t end) { return start != 0 && end != 0 && end >= start; }

template <typename T>
void append(std::vector<T>& to, std::vector<T>& from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

}  // namespace

const char* to_string(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return "host-to-device";
    case CopyKind::kDeviceToHost:
      return "device-to-host";
    case CopyKind::kDeviceToDevice:
      return "device-to-device";
    case CopyKind::kPeer:
      return "peer";
    case CopyKind::kHostToHost:
      return "host-to-host";
    case CopyKind::kOther:
      break;
  }
  return "other";
}

void ActivityLog::add_kernel(KernelActivity k) {
  if (!usable(k.start_ns, k.end_ns)) {
    ++invalid;
    return;
  }
  kernels.push_back(std::move(k));
}

void ActivityLog::add_copy(CopyActivity c) {
  if (!usable(c.start_ns, c.end_ns)) {
    ++invalid;
    return;
  }
  copies.push_back(c);
}

void ActivityLog::add_set(SetActivity s) {
  if (!usable(s.start_ns, s.end_ns)) {
    ++invalid;
    return;
  }
  sets.push_back(s);
}

void ActivityLog::merge(ActivityLog o) {
  append(kernels, o.kernels);
  append(copies, o.copies);
  append(sets, o.sets);
  append(correlations, o.correlations);
  dropped += o.dropped;
  invalid += o.invalid;
  other += o.other;
}

Attribution action_spans(const ActivityLog& log) {
  Attribution out;
  std::unordered_map<uint32_t, uint64_t> external;  // correlation id -> external id
  for (const ExternalCorrelation& c : log.correlations) {
    const auto [it, inserted] = external.emplace(c.correlation, c.external_id);
    if (!inserted && it->second != c.external_id) ++out.ambiguous;
  }
  std::map<uint64_t, ActionSpan> spans;
  auto add = [&](uint32_t correlation, uint64_t start, uint64_t end, int ActionSpan::*count) {
    const auto it = external.find(correlation);
    if (it == external.end()) {
      ++out.unattributed;
      return;
    }
    auto [pos, fresh] = spans.try_emplace(it->second);
    ActionSpan& span = pos->second;
    if (fresh) {
      span.external_id = it->second;
      span.start_ns = start;
      span.end_ns = end;
    }
    span.start_ns = std::min(span.start_ns, start);
    span.end_ns = std::max(span.end_ns, end);
    ++(span.*count);
  };
  for (const KernelActivity& k : log.kernels) {
    add(k.correlation, k.start_ns, k.end_ns, &ActionSpan::kernels);
  }
  for (const CopyActivity& c : log.copies) {
    add(c.correlation, c.start_ns, c.end_ns, &ActionSpan::copies);
  }
  for (const SetActivity& s : log.sets) add(s.correlation, s.start_ns, s.end_ns, &ActionSpan::sets);
  out.spans.reserve(spans.size());
  for (auto& [id, span] : spans) out.spans.push_back(span);
  return out;
}

std::string summary(const ActivityLog& log) {
  return fmt::format("{} kernels, {} copies, {} sets; {} dropped, {} invalid", log.kernels.size(),
                     log.copies.size(), log.sets.size(), log.dropped, log.invalid);
}

}  // namespace ppsim::gpu
