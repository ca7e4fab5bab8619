// Schedules as CSV, one row per rank, one action string per cell, as
// torch.distributed.pipelining writes them ("0F0,0F1,0B0"). Empty cells are
// skipped. Lines starting with '#' are comments.
//
// The reader also takes PyTorch's compute-only files (`_dump_csv`) of any
// release: older ones spelled the input-gradient backward `B` (now `I`) and the
// full backward `BW` (now `B`). An overlapped pair ("(0F7;7B3)OVERLAP_F_B",
// DualPipe's) is read as its forward, marked Action::overlaps_next, and then
// its backward, and written back as one cell. The transfer cells of
// PyTorch's compute+comms format (SEND_F, RECV_F, SEND_B, RECV_B) are
// checked (a send after the action it sends from, on the same rank; a
// receive before the action that needs it) and become the schedule's
// comm_posts, with a note; a schedule with comm_posts is written with them,
// sends before receives where several stand together. Its FSDP cells
// (UNSHARD, RESHARD, REDUCE_GRAD, per stage) are read, their stage checked
// against the row's rank, and set aside with a note: not timed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedules/schedule.h"

namespace ppsim {

// ppsim's form: a '#' line naming the schedule, then one row per rank.
std::string schedule_to_csv(const Schedule& schedule);
// PyTorch's compute-only form (compute+comms when the schedule has
// comm_posts), as `_dump_csv` writes and `_load_csv` reads: no comment
// line, rows ended by "\r\n" (Python's csv.writer). An error for what PyTorch cannot read back:
// optimizer steps (S) and token slices.
Result<std::string> schedule_to_pytorch_csv(const Schedule& schedule);

// A schedule read from a file, with what the reader had to interpret
// (an older PyTorch spelling) for the caller to show.
struct ScheduleFile {
  Schedule schedule;
  std::vector<std::string> notes;
};
// Reads the programs back. The stage -> rank map is derived from where each
// stage's forwards appear; num_stages and num_microbatches from the largest
// indices. `source` names the input in errors (a file name). The result is
// not validated: call validate().
Result<ScheduleFile> read_schedule_csv(std::string_view text, std::string_view source);
// read_schedule_csv without the notes.
Result<Schedule> schedule_from_csv(std::string_view text, std::string_view source);

}  // namespace ppsim
