#include "schedules/limits.h"

#include <fmt/format.h>

namespace ppsim {

int64_t max_schedule_actions(int64_t stages, int64_t microbatches, int64_t slices) {
  return 3 * stages * microbatches * slices;  // each factor is capped first: no overflow
}

Status check_schedule_size(int64_t ranks, int64_t stages, int64_t microbatches, int64_t slices) {
  struct Size {
    const char* what;
    int64_t value;
    int64_t cap;
  };
  for (const Size& size : {Size{"ranks", ranks, kMaxRanks}, Size{"stages", stages, kMaxStages},
                           Size{"microbatches", microbatches, kMaxMicrobatches},
                           Size{"token slices", slices, kMaxSlices}}) {
    if (size.value < 1 || size.value > size.cap) {
      return Error{fmt::format("{} {}: expected 1 to {}", size.value, size.what, size.cap)};
    }
  }
  const int64_t actions = max_schedule_actions(stages, microbatches, slices);
  if (actions > kMaxScheduleActions) {
    return Error{fmt::format(
        "{} stages x {} microbatches x {} token slices make up to {} actions, more than the "
        "{} ppsim simulates (about 10 GiB of memory): use fewer stages, microbatches or slices",
        stages, microbatches, slices, actions, kMaxScheduleActions)};
  }
  return {};
}

}  // namespace ppsim
