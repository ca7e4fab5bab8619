// The CUDA backend over several GPUs (`mpirun -np P ppsim run CONFIG
// --backend cuda`): one process per pipeline rank, each on a GPU of its
// own, running its rank's program on GpuStages (gpu_stage.h) with the
// executor of every backend (rank_executor.h). A tensor for another rank
// goes by NCCL send/receive, device to device; its key and shape go ahead
// of it over MPI, and the receives are posted in the sender's order
// (ordered_links.h: a communicator per direction between two ranks).
// Library `ppsim_runtime_cuda_mpi`, built with the CUDA toolkit, NCCL and
// MPI; no CUDA, NCCL or MPI type appears here. MPI's lifetime is the
// caller's (mpi.h: mpi_init, run_cuda_mpi on every rank, mpi_finalize, or
// mpi_abort after a failure on a rank).
//
// Placement: the k-th rank of a host (in world-rank order) runs on device
// `options.device + k` of the devices the process sees; NCCL cannot put
// two ranks of a communicator on one GPU, so a host needs a GPU per rank
// (on one GPU, run_cuda puts every rank on it as a stream).
//
// Timing: each process traces its rank's actions (CUPTI, or CUDA events);
// the spans of every rank are gathered and aligned with the run's clock per
// rank (device_spans.h), each rank being its own device. The clock is
// run_mpi's: rank 0's steady clock after a barrier. A TransferRecord starts
// when the sender issued the send (right after the producing action) and
// ends when the receiving rank's host saw the tensor arrive, which is
// before the consuming action starts.
#pragma once

#include "real_runtime/cuda.h"
#include "real_runtime/runtime.h"

namespace ppsim::runtime {

// Runs `settings.iterations` iterations of `schedule`, this process being
// rank mpi_rank() of the pipeline; collective over MPI_COMM_WORLD, whose
// size must be schedule.num_ranks. Every rank returns the whole run, as
// run_mpi does. Errors: the checks (plan_run's, S actions, a storage type
// other than bf16 or fp16, the world size) and the setup (no GPU for a
// rank, its context, its stages) come back alike on every rank, with
// `info->failed_on_every_rank`; a failure after that (creating the NCCL
// communicators, a CUDA or NCCL error, a failure in an action: "rank 1,
// 1F3: <what>") comes back on the failing rank only while the others wait
// for it, and the caller must end the job with mpi_abort. `info`, when
// given, is filled on every rank: placements per rank ("device 1 (NVIDIA
// H200), all 132 SMs, host gpu-3"), sharing, timing. REQUIRES: mpi_init.
Result<RunResult> run_cuda_mpi(const Schedule& schedule, const RuntimeModel& model,
                               const RunSettings& settings, const CudaRunOptions& options = {},
                               CudaRunInfo* info = nullptr);

}  // namespace ppsim::runtime
