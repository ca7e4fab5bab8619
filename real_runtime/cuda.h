// The CUDA backend of the real runtime (`ppsim run --backend cuda`): every
// pipeline rank of a schedule on one GPU, as a thread with a stream of its
// own and, where the driver has green contexts, a group of the GPU's SMs of
// its own (gpu::SmPartition: p equal, disjoint groups, so that each rank is
// a smaller GPU and ranks do not slow each other's kernels down; otherwise
// plain streams that share every SM, said in CudaRunInfo). Each rank runs
// its program with the executor the CPU backends use (rank_executor.h), on
// GpuStages (gpu_stage.h) in the model's bf16 or fp16. A tensor for
// another rank is copied into a buffer of the device (the link:
// device-to-device) by a thread and a stream of its link, as the threads
// backend's links copy (transfer_worker.h), while the sender goes on; the
// receiver then owns it.
// Library `ppsim_runtime_cuda`, built only with the CUDA toolkit; no CUDA
// type appears here.
//
// Timing: every action is bracketed on the host (its record's start before
// its work is issued, its end after the rank waited for the work), and
// traced by the GpuTracer (CUPTI, or CUDA events): when the trace has the
// actions' spans, they replace the brackets (device_spans.h), so a record
// is the GPU's time for the action. Transfers and the optimizer step keep
// their host times. Without a tracer the brackets stay, said in CudaRunInfo.
//
// Several GPUs, one process each, NCCL between them: run_cuda_mpi
// (cuda_mpi.h). Not built: asynchronous schedules (S actions need weight
// stashing on the GPU).
#pragma once

#include <string>
#include <vector>

#include "real_runtime/runtime.h"

namespace ppsim::runtime {

struct CudaRunOptions {
  // The GPU; run_cuda_mpi: the first GPU of each host's ranks.
  int device = 0;
  // With more than one rank, give each rank its own group of SMs (green
  // contexts); false, or where the driver cannot: plain streams. Not used
  // by run_cuda_mpi (a rank has a whole GPU).
  bool split_sms = true;
};

// How a run was placed and timed, for the output of the tools.
struct CudaRunInfo {
  std::vector<std::string> placements;  // per rank, GpuContext::placement()
  // "green contexts: 4 groups of 32 of 132 SMs" or "plain streams sharing
  // all SMs (<why not green contexts>)".
  std::string sharing;
  // "CUPTI spans of each action's GPU work", "CUDA event pairs around each
  // action (<why not CUPTI>)", or "host brackets (<why no device spans>)".
  std::string timing;
  bool green_contexts = false;
  int sms_per_rank = 0;  // with green contexts
  // run_cuda_mpi (cuda_mpi.h): the Error came back alike on every rank (the
  // checks and the setup before the run), so one rank may report it and the
  // job end normally.
  bool failed_on_every_rank = false;
};

// Runs `settings.iterations` iterations of `schedule` on device
// `options.device`. Errors: plan_run's, a schedule with S actions, no
// usable device (saying why), a CUDA error on a rank ("rank 1, 1F3: CUDA
// error in ..."), or a failure on a rank as in run_threads. `info`, when
// given, is filled once the ranks are placed.
Result<RunResult> run_cuda(const Schedule& schedule, const RuntimeModel& model,
                           const RunSettings& settings, const CudaRunOptions& options = {},
                           CudaRunInfo* info = nullptr);

}  // namespace ppsim::runtime
