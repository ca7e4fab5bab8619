// The MPI backend of the real runtime: one process per rank, started by
// `mpirun -np P`, each running its rank's program with the executor the
// threads backend uses (rank_executor.h); activations and gradients travel
// as MPI point-to-point messages. Library `ppsim_runtime_mpi`, built only
// when CMake finds MPI; no MPI type appears here.
//
// The executable owns MPI's lifetime: mpi_init first, then run_mpi on every
// rank, then mpi_finalize, or mpi_abort after a failure on a rank.
//
// Failures:
// - Checks before the run (check_mpi_run: an invalid schedule, a world size
//   other than the schedule's ranks, ...) fail alike on every rank, before
//   any message: report once and mpi_finalize.
// - An exception on a rank comes back from run_mpi on that rank only,
//   "rank 1, 1F3: <what>", while the others wait for it in a receive or the
//   barrier: the caller must end the job with mpi_abort.
// - A rank that dies (SIGKILL, a crash) is mpirun's to notice: it names the
//   rank and ends the others with SIGTERM. While run_mpi runs, a rank that
//   receives SIGTERM looks for a rank of its host that is gone and prints
//   "ppsim: rank 1 died in 1F3 (iteration 1)" (once per host) before it
//   ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "real_runtime/runtime.h"
#include "sim/cost/cost_profile.h"

namespace ppsim::runtime {

// The exit code with which mpi_abort ends a job after a rank failed.
inline constexpr int kRankFailedExitCode = 3;

// Whether this process was started by mpirun (or another MPI launcher): the
// launcher's environment (OMPI_COMM_WORLD_SIZE for OpenMPI, PMI_SIZE or
// PMIX_RANK for others). Needs no mpi_init; a tool that starts MPI only when
// launched so, and otherwise runs alone, asks this first.
bool mpi_launched();
// MPI_Init. Error when MPI cannot start.
Status mpi_init(int* argc, char*** argv);
// MPI_Finalize, when mpi_init succeeded.
void mpi_finalize();
// Ends every process of the job (MPI_Abort) with `exit_code`.
[[noreturn]] void mpi_abort(int exit_code);
// This process's rank and the number of processes. REQUIRES: mpi_init.
int mpi_rank();
int mpi_size();
// `text` of rank `root`, on every rank (MPI_Bcast). Collective over
// MPI_COMM_WORLD. Throws std::length_error over 2 GiB. REQUIRES: mpi_init.
std::string mpi_broadcast_text(const std::string& text, int root);
// The first (by rank) non-empty `error` of any rank, on every rank; empty
// when no rank had one. Collective over MPI_COMM_WORLD. REQUIRES: mpi_init.
std::string mpi_first_error(const std::string& error);

// MPI's lifetime in a tool: `start` (mpi_init) after the options are
// parsed, mpi_finalize when the session ends, if it started.
class MpiSession {
 public:
  MpiSession() = default;
  ~MpiSession() {
    if (started_) mpi_finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  Status start(int* argc, char*** argv) {
    Status st = mpi_init(argc, argv);
    started_ = st.ok();
    return st;
  }
  // mpi_rank() once started; 0 (the one that reports) before.
  int rank() const { return started_ ? mpi_rank() : 0; }
  bool started() const { return started_; }

 private:
  bool started_ = false;
};

// The checks run_mpi makes before any message: what plan_run checks (a
// valid synchronous schedule, a model it splits, ...), a world size equal
// to schedule.num_ranks, and enough MPI tags. The same on every rank, so a
// caller can report a failure once and end normally. REQUIRES: mpi_init.
Status check_mpi_run(const Schedule& schedule, const RuntimeModel& model,
                     const RunSettings& settings);

// Runs `settings.iterations` iterations of `schedule`, this process being
// rank mpi_rank() of the pipeline; collective over MPI_COMM_WORLD, whose
// size must be schedule.num_ranks. Every rank returns the whole run
// (gathered from all ranks): the Timeline, times in picoseconds since a
// common start, the weights of every stage and the losses.
//
// Clocks: after a barrier, rank 0 reads its steady clock and broadcasts
// it; on one host steady_clock is the system's CLOCK_MONOTONIC, so every
// rank measures from that same instant. Ranks on another host than rank 0
// start their clock when they leave the barrier instead (no offset
// estimation), so their times are only as aligned as the barrier.
//
// Transfers: a TransferRecord starts when the producer's rank posts the
// send (MPI_Isend, right after the action) and ends when the consumer's
// rank has received it, which is before the consumer starts.
//
// REQUIRES: mpi_init.
Result<RunResult> run_mpi(const Schedule& schedule, const RuntimeModel& model,
                          const RunSettings& settings);

// The MPI link (real_runtime/mpi_link.cc): a ping-pong between world ranks 0
// and 1. For each of `sizes` (bytes), after max(warmup, 1) untimed round
// trips, `repetitions` round trips of a message of that size (MPI_Send, then
// MPI_Recv of the echo, blocking); one sample's time is half the median
// round trip. Rank 0 returns one sample per size, in order; rank 1 returns
// none; ranks above 1 only join the barriers around the sweep. Collective
// over MPI_COMM_WORLD. Error, on every rank alike and before any message,
// when the world has fewer than 2 ranks, repetitions < 1, or a size is
// negative or above INT_MAX. REQUIRES: mpi_init.
Result<std::vector<LinkSample>> mpi_ping_pong(const std::vector<int64_t>& sizes, int warmup,
                                              int repetitions);

// mpi_ping_pong, fitted on rank 0 by fit_link as the link `name`; when the
// fit fails (noise), the sweep is measured again, up to three times in all,
// as the profiler does for its thread copies. Rank 0 returns the fit, with
// its samples, or the last fit's error; the other ranks return a LinkFit
// with only the name, or an Error when rank 0 could not fit (rank 0 reports
// it). Collective over MPI_COMM_WORLD. REQUIRES: mpi_init.
Result<LinkFit> measure_mpi_link(const std::string& name, const std::vector<int64_t>& sizes,
                                 int warmup, int repetitions);

}  // namespace ppsim::runtime
