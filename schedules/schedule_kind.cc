#include "schedules/schedule_kind.h"

#include <array>
#include <ostream>

namespace ppsim {
namespace {

struct KindName {
  ScheduleKind kind;
  std::string_view name;
};

// In enum order: to_string indexes it.
constexpr std::array kKindNames = {
    KindName{ScheduleKind::kGpipe, "gpipe"},
    KindName{ScheduleKind::k1f1b, "1f1b"},
    KindName{ScheduleKind::kInterleaved1f1b, "interleaved-1f1b"},
    KindName{ScheduleKind::kZbH1, "zb-h1"},
    KindName{ScheduleKind::kZbH2, "zb-h2"},
    KindName{ScheduleKind::kZbV, "zb-v"},
    KindName{ScheduleKind::kDualPipe, "dualpipe"},
    KindName{ScheduleKind::kDualPipeV, "dualpipev"},
    KindName{ScheduleKind::kLoopedBfs, "looped-bfs"},
    KindName{ScheduleKind::kInterleavedZb, "interleaved-zb"},
    KindName{ScheduleKind::kTeraPipe, "terapipe"},
    KindName{ScheduleKind::kPipeDream, "pipedream"},
    KindName{ScheduleKind::kPipeDream2bw, "pipedream-2bw"},
    KindName{ScheduleKind::kZbAuto, "zb-auto"},
    KindName{ScheduleKind::kCustom, "custom"},
};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (static_cast<size_t>(kKindNames[i].kind) != i) return false;
  }
  return true;
}
static_assert(in_enum_order());

// zb-auto and custom come last: the generated kinds are all but those two.
static_assert(kKindNames[kKindNames.size() - 2].kind == ScheduleKind::kZbAuto);
static_assert(kKindNames[kKindNames.size() - 1].kind == ScheduleKind::kCustom);

}  // namespace

std::string_view to_string(ScheduleKind kind) { return kKindNames[static_cast<size_t>(kind)].name; }

std::ostream& operator<<(std::ostream& out, ScheduleKind kind) { return out << to_string(kind); }

std::optional<ScheduleKind> schedule_kind_named(std::string_view name) {
  for (const KindName& k : kKindNames) {
    if (k.name == name) return k.kind;
  }
  return std::nullopt;
}

const std::vector<ScheduleKind>& config_schedule_kinds() {
  static const std::vector<ScheduleKind> kinds = [] {
    std::vector<ScheduleKind> all;
    for (const KindName& k : kKindNames) all.push_back(k.kind);
    return all;
  }();
  return kinds;
}

const std::vector<ScheduleKind>& generated_schedule_kinds() {
  static const std::vector<ScheduleKind> kinds(config_schedule_kinds().begin(),
                                               config_schedule_kinds().end() - 2);
  return kinds;
}

std::string joined_names(const std::vector<ScheduleKind>& kinds) {
  std::string out;
  for (ScheduleKind kind : kinds) {
    if (!out.empty()) out += ", ";
    out += to_string(kind);
  }
  return out;
}

}  // namespace ppsim
