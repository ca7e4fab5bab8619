#include "schedules/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "schedules/generators.h"
#include "schedules/validate.h"

namespace ppsim {
namespace csv_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(Csv, RoundTripsEveryGeneratedSchedule) {
  for (ScheduleKind kind : generated_schedule_kinds()) {
    // 2 slices for terapipe, batches of all 8 microbatches for pipedream-2bw.
    const Result<Schedule> s =
        make_schedule(kind, {4, 8, fixed_virtual_stages(kind).value_or(2), 2, 8});
    ASSERT_TRUE(s.ok());
    const Result<Schedule> back = schedule_from_csv(schedule_to_csv(*s), "x.csv");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->programs, s->programs) << kind;
    EXPECT_EQ(back->stage_rank, s->stage_rank) << kind;
    EXPECT_EQ(back->num_stages, s->num_stages);
    EXPECT_EQ(back->num_microbatches, s->num_microbatches);
  }
}

TEST(Csv, ToleratesSpacesEmptyCellsCommentsAndCrLf) {
  const Result<Schedule> s =
      schedule_from_csv("# comment\r\n 0F0 ,,0B0\r\n1F0, 1B0,\r\n\r\n", "x.csv");
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->num_ranks, 2);
  EXPECT_EQ(program_to_string(s->programs[0]), "0F0 0B0");
  EXPECT_EQ(program_to_string(s->programs[1]), "1F0 1B0");
}

TEST(Csv, NamesTheBadCell) {
  const Result<Schedule> s = schedule_from_csv("0F0,0B0\n1F0,1X0\n", "my.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(
      s.error().message,
      "my.csv:2: cell 2 (rank 1): \"1X0\" is not an action: expected STAGE KIND MICROBATCH "
      "with KIND one of F, B, I, W, S (e.g. \"2F0\"), and sSLICE for a token slice (\"2F0s3\")");
}

TEST(Csv, StageOnTwoRanks) {
  const Result<Schedule> s = schedule_from_csv("# two ranks\n0F0,0B0\n0F1,0B1\n", "my.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "my.csv:3: stage 0 has forwards on rank 0 (line 2) and on rank 1 (line 3, \"0F1\"); a "
            "stage runs on one rank");
}

// A hand-edited file that repeats an action: the repeat's line and cell and
// the first's (validate() sees only the programs, not where they came from).
TEST(Csv, ARepeatedActionNamesBothCells) {
  const Result<Schedule> s = schedule_from_csv("0F0,0F1,0B0\n1F0,1B0,1F1\n# x\n1B1,1F0\n", "r.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "r.csv:4: cell 2 (rank 2): 1F0 again, first at line 2 cell 1");
}

TEST(Csv, Empty) {
  const Result<Schedule> s = schedule_from_csv("# nothing\n\n", "e.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "e.csv: no ranks: the file has no action rows");
}

// Issue 14's reproducers: an index at INT_MAX overflowed stage + 1 (a
// segfault), one just below it asked for an 8 GiB index table.
TEST(Csv, IndexPastItsCapIsAnErrorNamingTheCap) {
  const Result<Schedule> max = schedule_from_csv("2147483647F1\n", "big.csv");
  ASSERT_FALSE(max.ok());
  EXPECT_EQ(max.error().message,
            "big.csv:1: cell 1 (rank 0): \"2147483647F1\": stage 2147483647 is past the largest "
            "ppsim simulates (65535)");
  const Result<Schedule> below = schedule_from_csv("0F2147483646\n", "big.csv");
  ASSERT_FALSE(below.ok());
  EXPECT_THAT(below.error().message,
              HasSubstr("microbatch 2147483646 is past the largest ppsim simulates (4194303)"));
  const Result<Schedule> overflow = schedule_from_csv("0F99999999999\n", "big.csv");
  ASSERT_FALSE(overflow.ok());
  EXPECT_THAT(overflow.error().message, HasSubstr("is not an action"));
}

// Each index within its cap, but their product past the actions ppsim
// replays: refused before the index table is allocated.
TEST(Csv, SizesWhoseProductIsTooLargeAreRefused) {
  const Result<Schedule> s = schedule_from_csv("65535F4194303\n", "wide.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "wide.csv: 65536 stages x 4194304 microbatches x 1 token slices make up to "
            "824633720832 actions, more than the 33554432 ppsim simulates (about 10 GiB of "
            "memory): use fewer stages, microbatches or slices");
}

TEST(Csv, ControlCharactersInACellAreEscaped) {
  const Result<Schedule> s = schedule_from_csv("0F0,\x1b[2J\n", "c.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("\"\\x1b[2J\" is not an action"));
}

// Files copied verbatim from PyTorch's repository (tests/data/pytorch/README.md).
std::string pytorch_artifact(const std::string& name) {
  std::ifstream in(std::string(PPSIM_SOURCE_DIR "/tests/data/pytorch/") + name, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ZB1P on 2 ranks, 2 stages each, 8 microbatches, as PyTorch wrote it before
// the input-gradient backward was renamed from B to I.
TEST(PytorchCsv, OlderReleaseArtifactReadsItsBAsI) {
  const std::string name = "zb1p_2rank_2stagep_compute_old_spelling.csv";
  const Result<ScheduleFile> file = read_schedule_csv(pytorch_artifact(name), name);
  ASSERT_TRUE(file.ok()) << file.error().message;
  // One B per (stage, microbatch): 4 stages x 8 microbatches.
  EXPECT_THAT(
      file->notes,
      ElementsAre(name + ": in the spelling of older torch.distributed.pipelining releases (it "
                         "splits every backward into B and W and has no I): read its 32 B cells "
                         "as I, the input-gradient backward"));
  const Schedule& s = file->schedule;
  EXPECT_TRUE(validate(s).ok()) << validate(s).message();
  EXPECT_EQ(s.num_stages, 4);
  EXPECT_EQ(s.num_microbatches, 8);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 0, 1}));
  ASSERT_EQ(s.num_ranks, 2);
  for (const auto& program : s.programs) {
    // 2 stages x 8 microbatches x F, I and W; the file's empty cells are idle steps.
    EXPECT_EQ(program.size(), 48u);
  }
  // Row 1 begins ",1F0,1F1,3F0,3B0,3F1,3B1,3W0".
  EXPECT_EQ(program_to_string({s.programs[1].begin(), s.programs[1].begin() + 7}),
            "1F0 1F1 3F0 3I0 3F1 3I1 3W0");
}

TEST(PytorchCsv, OlderAndCurrentSpellingOfOneScheduleReadAlike) {
  const std::string old_name = "zb1p_2rank_2stagep_compute_old_spelling.csv";
  const std::string name = "zb1p_2rank_2stagep_compute.csv";
  const Result<ScheduleFile> old = read_schedule_csv(pytorch_artifact(old_name), old_name);
  const Result<ScheduleFile> current = read_schedule_csv(pytorch_artifact(name), name);
  ASSERT_TRUE(old.ok()) << old.error().message;
  ASSERT_TRUE(current.ok()) << current.error().message;
  EXPECT_THAT(current->notes, IsEmpty());
  EXPECT_EQ(old->schedule.programs, current->schedule.programs);
}

TEST(PytorchCsv, ReadsTheOlderFullBackwardBW) {
  const Result<ScheduleFile> file = read_schedule_csv("0F0,1F0,1B0,1W0,0BW0\n", "old.csv");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(program_to_string(file->schedule.programs[0]), "0F0 1F0 1I0 1W0 0B0");
  EXPECT_THAT(file->notes,
              ElementsAre("old.csv: in the spelling of older torch.distributed.pipelining "
                          "releases (it has BW cells): read its 1 B cells as I, the "
                          "input-gradient backward, and its 1 BW cells as B, the full backward"));
  EXPECT_TRUE(validate(file->schedule).ok()) << validate(file->schedule).message();
}

// Older releases checked that a zero-bubble schedule had as many W as B
// ("Length weight steps != Length bwd steps"): a B without a W is no file of
// theirs, and keeps today's meaning, for validate() to report.
TEST(PytorchCsv, BackwardsNotAllPairedWithWKeepTodaysSpelling) {
  const Result<ScheduleFile> file = read_schedule_csv("0F0,0F1,0B0,0W0,0B1\n", "x.csv");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_THAT(file->notes, IsEmpty());
  EXPECT_EQ(program_to_string(file->schedule.programs[0]), "0F0 0F1 0B0 0W0 0B1");
}

TEST(PytorchCsv, WriterWritesRowsAsPythonsCsvWriter) {
  // 1F1B on 2 ranks: rank 0 warms up with p-1 = 1 forward.
  const Result<std::string> text =
      schedule_to_pytorch_csv(*make_schedule(ScheduleKind::k1f1b, {2, 2}));
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n");
}

TEST(PytorchCsv, RoundTripsEveryGeneratedSchedulePytorchCanRun) {
  // PyTorch has no optimizer step inside a program nor token slices.
  const std::map<ScheduleKind, std::string> refused = {
      {ScheduleKind::kPipeDream, "is an optimizer step inside the program"},
      {ScheduleKind::kPipeDream2bw, "is an optimizer step inside the program"},
      {ScheduleKind::kTeraPipe, "\"0F0s1\" is a token slice"},  // microbatch 0's second slice
  };
  for (ScheduleKind kind : generated_schedule_kinds()) {
    // 2 slices for terapipe, batches of all 4 microbatches for pipedream-2bw.
    const Result<Schedule> s =
        make_schedule(kind, {2, 4, fixed_virtual_stages(kind).value_or(2), 2, 4});
    ASSERT_TRUE(s.ok()) << kind << ": " << s.error().message;
    const Result<std::string> text = schedule_to_pytorch_csv(*s);
    if (refused.contains(kind)) {
      ASSERT_FALSE(text.ok()) << kind;
      EXPECT_THAT(text.error().message, HasSubstr(refused.at(kind))) << kind;
      continue;
    }
    ASSERT_TRUE(text.ok()) << kind << ": " << text.error().message;
    const Result<ScheduleFile> back = read_schedule_csv(*text, "x.csv");
    ASSERT_TRUE(back.ok()) << kind << ": " << back.error().message;
    EXPECT_THAT(back->notes, IsEmpty()) << kind;
    EXPECT_EQ(back->schedule.programs, s->programs) << kind;
    EXPECT_EQ(back->schedule.stage_rank, s->stage_rank) << kind;
  }
}

// DualPipeV on 4 ranks, 10 microbatches, 8 stages in a V (rank i holds
// stages i and 7 - i): its 41 overlapped pairs (9, 10, 11 and 11 on the
// four rows) are read as their forward and then their backward, and the
// reader says so.
TEST(PytorchCsv, OverlappedPairsAreReadAsAForwardThatOverlapsItsBackward) {
  const std::string name = "dualpipev_4rank_10mb.csv";
  const Result<ScheduleFile> file = read_schedule_csv(pytorch_artifact(name), name);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_THAT(file->notes, IsEmpty());
  const Schedule& s = file->schedule;
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(s.num_microbatches, 10);
  // Rank 0's 18th cell, "(0F7;7B3)OVERLAP_F_B", is its 18th and 19th actions,
  // the forward marked as overlapping the next.
  EXPECT_EQ(to_string(s.programs[0][17]), "0F7");
  EXPECT_EQ(to_string(s.programs[0][18]), "7B3");
  EXPECT_TRUE(s.programs[0][17].overlaps_next);
  EXPECT_FALSE(s.programs[0][18].overlaps_next);
  size_t pairs = 0;
  for (const auto& program : s.programs) {
    pairs += std::count_if(program.begin(), program.end(),
                           [](const Action& a) { return a.overlaps_next; });
  }
  EXPECT_EQ(pairs, 41u);  // the file's OVERLAP_F_B cells, counted with grep
  // The program's text writes the pair as PyTorch's cell does, without the suffix.
  EXPECT_THAT(program_to_string(s.programs[0]), HasSubstr(" 7F3 (0F7;7B3) (7F4;0B0) "));
  // 8 stages x 10 microbatches, each a forward and a full backward or an
  // I and a W.
  size_t forwards = 0;
  for (const auto& program : s.programs) {
    forwards += std::count_if(program.begin(), program.end(),
                              [](const Action& a) { return a.kind == ActionKind::kForward; });
  }
  EXPECT_EQ(forwards, 80u);
  EXPECT_TRUE(validate(s).ok()) << validate(s).message();
}

// ppsim's dualpipev generator builds PyTorch's ScheduleDualPipeV order: rank
// by rank, action by action and pair by pair, the artifact above; and
// written in PyTorch's format it is that file, cell for cell.
TEST(PytorchCsv, DualPipeVGeneratorBuildsPytorchsOrder) {
  const std::string name = "dualpipev_4rank_10mb.csv";
  const std::string text = pytorch_artifact(name);
  const Result<ScheduleFile> file = read_schedule_csv(text, name);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const Result<Schedule> generated = make_schedule(ScheduleKind::kDualPipeV, {4, 10, 2});
  ASSERT_TRUE(generated.ok()) << generated.error().message;
  EXPECT_EQ(generated->stage_rank, file->schedule.stage_rank);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(generated->programs[rank], file->schedule.programs[rank]) << "rank " << rank;
  }
  const Result<std::string> written = schedule_to_pytorch_csv(*generated);
  ASSERT_TRUE(written.ok()) << written.error().message;
  std::string unix_lines = *written;  // the artifact's rows end in "\n"
  std::erase(unix_lines, '\r');
  EXPECT_EQ(unix_lines, text);
}

// ppsim's interleaved-zb builds PyTorch's ScheduleInterleavedZeroBubble
// (ZB1P): the artifact's order on 2 ranks, 2 stages each, 8 microbatches,
// its idle cells dropped.
TEST(PytorchCsv, InterleavedZeroBubbleGeneratorBuildsPytorchsOrder) {
  const std::string name = "zb1p_2rank_2stagep_compute.csv";
  const Result<Schedule> file = schedule_from_csv(pytorch_artifact(name), name);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const Result<Schedule> generated = make_schedule(ScheduleKind::kInterleavedZb, {2, 8, 2});
  ASSERT_TRUE(generated.ok()) << generated.error().message;
  EXPECT_EQ(generated->stage_rank, file->stage_rank);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(program_to_string(generated->programs[rank]), program_to_string(file->programs[rank]))
        << "rank " << rank;
  }
}

// PyTorch's ScheduleLoopedBFS on 2 ranks, 2 stages each, 2 microbatches, by
// hand: every forward of the first local stage, then of the second; then
// the backwards, last stage first, microbatches in reverse.
TEST(PytorchCsv, LoopedBfsRunsEachStageBreadthFirst) {
  const Result<Schedule> s = make_schedule(ScheduleKind::kLoopedBfs, {2, 2, 2});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(program_to_string(s->programs[0]), "0F0 0F1 2F0 2F1 2B1 2B0 0B1 0B0");
  EXPECT_EQ(program_to_string(s->programs[1]), "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0");
  EXPECT_TRUE(validate(*s).ok()) << validate(*s).message();
}

TEST(PytorchCsv, DualPipeVNeedsAMicrobatchPerStage) {
  const Result<Schedule> few = make_schedule(ScheduleKind::kDualPipeV, {4, 7, 2});
  ASSERT_FALSE(few.ok());
  EXPECT_THAT(few.error().message,
              HasSubstr("schedule dualpipev: needs at least as many microbatches as stages (2 x "
                        "4 = 8), got 7"));
  EXPECT_FALSE(make_schedule(ScheduleKind::kDualPipeV, {4, 8, 1}).ok());
}

TEST(PytorchCsv, AnOverlappedPairIsAForwardThenABackward) {
  const Result<Schedule> one = schedule_from_csv("(0F0)OVERLAP_F_B\n", "p.csv");
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.error().message,
              HasSubstr("p.csv:1: cell 1 (rank 0): \"(0F0)OVERLAP_F_B\": an overlapped pair "
                        "needs two actions, (F;B)"));
  const Result<Schedule> swapped = schedule_from_csv("0F0,1F0,(1B0;0F1)OVERLAP_F_B\n", "p.csv");
  ASSERT_FALSE(swapped.ok());
  EXPECT_THAT(swapped.error().message,
              HasSubstr("cell 3 (rank 0): \"(1B0;0F1)OVERLAP_F_B\": an overlapped pair is a "
                        "forward and then a backward (B or I), (F;B)"));
}

// PyTorch's compute+comms form: "0F0,0SEND_F0,2RECV_F0,0F1,0SEND_F1,...".
TEST(PytorchCsv, TransferCellsArePostedWhereTheyStand) {
  const std::string name = "zb1p_2rank_2stagep_comms.csv";
  const std::string text = pytorch_artifact(name);
  const Result<ScheduleFile> file = read_schedule_csv(text, name);
  ASSERT_TRUE(file.ok()) << file.error().message;
  // 8 microbatches cross each of the 3 stage boundaries forward and back,
  // a send and a receive each time: 8 x 3 x 2 x 2.
  EXPECT_THAT(file->notes, ElementsAre(HasSubstr(name + ": its 96 transfer cells (SEND_F, "
                                                        "RECV_F, SEND_B, RECV_B) are simulated "
                                                        "where they stand")));
  // Rank 0 runs 0F0, 0F1, 2F0, ...: 0F0's activation is sent once 0F0 is
  // done, 0F1's once 0F1 is, and the receive of 2F0's input is posted once
  // 0F0 is (the cell after 0SEND_F0).
  const std::vector<CommPosts>& posts = file->schedule.comm_posts[0];
  EXPECT_EQ(to_string(file->schedule.programs[0][2]), "2F0");
  EXPECT_EQ(posts[0], (CommPosts{1, -1}));
  EXPECT_EQ(posts[1], (CommPosts{2, -1}));
  EXPECT_EQ(posts[2].recv_after, 1);
  EXPECT_TRUE(validate(file->schedule).ok()) << validate(file->schedule).message();
  // The programs are the file's other cells, in their order.
  std::string kept;  // the file with its transfer cells emptied
  std::string cell;
  for (const char c : text + "\n") {
    if (c != ',' && c != '\n') {
      cell += c;
      continue;
    }
    if (cell.find("SEND") == std::string::npos && cell.find("RECV") == std::string::npos) {
      kept += cell;
    }
    kept += c;
    cell.clear();
  }
  const Result<Schedule> expected = schedule_from_csv(kept, "compute.csv");
  ASSERT_TRUE(expected.ok()) << expected.error().message;
  EXPECT_EQ(file->schedule.programs, expected->programs);
}

// Written back (PyTorch's form, then ppsim's), the posts read the same:
// the same programs and the same transfers posted after the same actions.
TEST(PytorchCsv, PostedTransfersRoundTrip) {
  const std::string name = "zb1p_2rank_2stagep_comms.csv";
  const Result<Schedule> read = schedule_from_csv(pytorch_artifact(name), name);
  ASSERT_TRUE(read.ok()) << read.error().message;
  const Result<std::string> written = schedule_to_pytorch_csv(*read);
  ASSERT_TRUE(written.ok()) << written.error().message;
  EXPECT_THAT(*written, HasSubstr("0F0,0SEND_F0,2RECV_F0,0F1,"));  // as in the file
  for (const std::string& text : {*written, schedule_to_csv(*read)}) {
    const Result<Schedule> back = schedule_from_csv(text, "back.csv");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->programs, read->programs);
    EXPECT_EQ(back->comm_posts, read->comm_posts);
  }
}

TEST(PytorchCsv, ATransferOutOfPlaceIsAnErrorNamingItsCell) {
  const auto error_of = [](const std::string& text) {
    const Result<ScheduleFile> file = read_schedule_csv(text, "t.csv");
    return file.ok() ? std::string("no error") : file.error().message;
  };
  EXPECT_EQ(error_of("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"), "no error");
  EXPECT_EQ(error_of("0SEND_F0,0F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0\n"),
            "t.csv:1: cell 1 (rank 0): \"0SEND_F0\": sends before the forward it sends from, 0F0 "
            "in cell 2");
  EXPECT_EQ(error_of("0F0,0SEND_F0,0B0,0RECV_B0\n1RECV_F0,1F0,1B0\n"),
            "t.csv:1: cell 4 (rank 0): \"0RECV_B0\": receives after the backward that needs it, "
            "0B0 in cell 3");
  EXPECT_EQ(error_of("0F0,0B0\n1RECV_F0,1F0,1B0,1SEND_F3\n"),
            "t.csv:2: cell 4 (rank 1): \"1SEND_F3\": rank 1 runs no forward of stage 1 "
            "microbatch 3 for it to send from");
  // A last row of transfers alone: a rank that runs nothing.
  EXPECT_EQ(error_of("0F0,0B0\n1RECV_F0\n"),
            "t.csv:2: cell 1 (rank 1): \"1RECV_F0\": rank 1 runs no forward of stage 1 "
            "microbatch 0 for it to receive for");
  EXPECT_EQ(error_of("0F0,0SEND_Fx\n"),
            "t.csv:1: cell 2 (rank 0): \"0SEND_Fx\" is not a transfer: expected STAGE SEND_F "
            "MICROBATCH (e.g. \"2SEND_F0\")");
}

// FSDP's cells are read and set aside with a note; each must name a stage
// of its own row's rank.
TEST(PytorchCsv, FsdpCellsAreReadAndSetAside) {
  const std::string text = "0UNSHARD,0F0,0B0, 0REDUCE_GRAD,0RESHARD\n1UNSHARD,1F0,1B0\n";
  const Result<ScheduleFile> file = read_schedule_csv(text, "u.csv");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_THAT(file->notes, ElementsAre(HasSubstr("u.csv: its 4 FSDP cells (UNSHARD, RESHARD, "
                                                 "REDUCE_GRAD) were read and set aside")));
  EXPECT_EQ(program_to_string(file->schedule.programs[0]), "0F0 0B0");
  const auto error_of = [](const std::string& bad) {
    const Result<ScheduleFile> read = read_schedule_csv(bad, "r.csv");
    return read.ok() ? std::string("no error") : read.error().message;
  };
  EXPECT_EQ(error_of("0F0,0B0,1REDUCE_GRAD\n1F0,1B0\n"),
            "r.csv:1: cell 3 (rank 0): \"1REDUCE_GRAD\": rank 0 runs no stage 1");
  EXPECT_EQ(error_of("0F0,0UNSHARD2\n"),
            "r.csv:1: cell 2 (rank 0): \"0UNSHARD2\" is not an FSDP action: expected STAGE "
            "UNSHARD (e.g. \"1UNSHARD\")");
}

}  // namespace
}  // namespace csv_test
}  // namespace ppsim
