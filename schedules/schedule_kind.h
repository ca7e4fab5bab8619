// The kinds of schedule a config or a command line may name: the families
// make_schedule generates, zb-auto (planned from the stage costs, in
// sim/plan) and custom (read from a CSV). Names are for files and command
// lines only; inside the program a kind is this enum.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppsim {

enum class ScheduleKind : uint8_t {
  kGpipe,
  k1f1b,
  kInterleaved1f1b,
  kZbH1,
  kZbH2,
  kZbV,
  kDualPipe,
  kDualPipeV,
  kLoopedBfs,
  kInterleavedZb,
  kTeraPipe,
  kPipeDream,
  kPipeDream2bw,
  kZbAuto,
  kCustom,
};

// "gpipe", "1f1b", "interleaved-1f1b", ..., "zb-auto", "custom".
std::string_view to_string(ScheduleKind kind);
// Writes to_string(kind) (test failures and traces print kinds by name).
std::ostream& operator<<(std::ostream& out, ScheduleKind kind);
// The kind of that name; nullopt for any other string.
std::optional<ScheduleKind> schedule_kind_named(std::string_view name);

// The kinds make_schedule generates, in the order help texts list them.
const std::vector<ScheduleKind>& generated_schedule_kinds();
// Every kind a config may name: the generated ones, then zb-auto and custom.
const std::vector<ScheduleKind>& config_schedule_kinds();
// Their names joined by ", ", for help texts and errors.
std::string joined_names(const std::vector<ScheduleKind>& kinds);

}  // namespace ppsim
