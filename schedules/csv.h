// Schedules as CSV, one row per rank, one action string per cell, as
// torch.distributed.pipelining writes them ("0F0,0F1,0B0"). Empty cells are
// skipped. Lines starting with '#' are comments.
#pragma once

#include <string>
#include <string_view>

#include "schedules/schedule.h"

namespace ppsim {

std::string schedule_to_csv(const Schedule& schedule);
// Reads the programs back. The stage -> rank map is derived from where each
// stage's forwards appear; num_stages and num_microbatches from the largest
// indices. `source` names the input in errors (a file name). The result is
// not validated: call validate().
Result<Schedule> schedule_from_csv(std::string_view text, std::string_view source);

}  // namespace ppsim
