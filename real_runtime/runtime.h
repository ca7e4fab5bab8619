// The real runtime: executes a validated `Schedule` with real
// compute (a small GPT, profiler/gpt_block.h and gpt_head.h) and records a
// measured `Timeline` in the simulator's format, so predicted and measured
// runs of one schedule join on the record index (sim/timeline.h).
//
// Backends are executors of the same per-rank programs (rank_executor.h).
// This header offers the threads backend (`run_threads`: one thread per
// rank, in-process mailboxes as links; the MPI backend, one process per
// rank, is `run_mpi` in mpi.h) and a sequential reference
// (`run_sequential`: the same model, data and SGD on one thread, microbatch
// by microbatch, whole sequences, no pipeline), whose final weights a
// correct pipeline run must reproduce up to summation order.
//
// Training: the model is split into `num_stages` runs of `layers /
// num_stages` blocks; stage 0 also holds the token and position embeddings,
// the last stage the final layer norm and the output projection. Each
// iteration trains on `num_microbatches` microbatches of `micro_batch`
// synthetic sequences (token ids drawn from `seed`, iteration and
// microbatch; the target of a token is the next one). The loss of a
// microbatch is scaled by 1 / (micro_batch seq_len m), so the losses of an
// iteration sum to the batch mean; gradients accumulate over the
// microbatches and one SGD step (fixed learning rate) ends the iteration on
// every rank.
//
// Asynchronous schedules (S actions: PipeDream, PipeDream-2BW) instead step
// a stage at each of its S actions, with the gradients gathered since its
// previous one, and nothing runs between iterations. A microbatch's F uses
// the stage's newest weights and stashes that version for its I, W or B
// (weight stashing); a version is freed when no microbatch needs it, so
// PipeDream keeps one per microbatch in flight and 2BW at most two. The
// loss scale stays 1 / (micro_batch seq_len m), m the stream's length: an
// iteration's steps add up to about one synchronous step, so a learning
// rate means the same for every schedule.
//
// No exception escapes this API: failures on any rank come back as an Error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/schedule.h"
#include "schedules/status.h"
#include "sim/core/timeline.h"
#include "sim/core/workload.h"

namespace ppsim::runtime {

enum class Precision {
  kFloat32,  // what a real run uses
  kFloat64,  // for comparing runs exactly: summation order then hardly matters
};

struct RuntimeModel {
  int layers = 4;
  int hidden = 16;
  int ffn = 32;
  int heads = 2;
  int seq_len = 8;
  int vocab = 32;
  int micro_batch = 2;                        // sequences per microbatch
  uint64_t seed = 1;                          // weights and data
  Precision precision = Precision::kFloat32;  // of the CPU backends
  DType dtype = DType::kBf16;                 // the CUDA backend's storage type: kBf16 or kFp16
  // Tokens per slice for token-sliced schedules (must sum to seq_len and
  // have Schedule::num_slices entries). Empty: an even cut, the first
  // seq_len % slices slices one token longer.
  std::vector<int> slice_lengths;
};

// The runtime's model for a config's model and micro-batch, cut into the
// given token slices (empty: not sliced). REQUIRES: config.model.
RuntimeModel model_for(const Config& config, const std::vector<int>& slice_lengths);

// The runtime executes a pipeline's schedule as the config gives it, but
// not every setting the simulator prices: one replica (no data
// parallelism), the layers split evenly over the stages, every activation
// kept (no recomputation), sends that do not wait for their receives, a
// synchronous optimizer step. A config that asks for another is an error
// naming its key, since `tool` (ppsim run, validate) would otherwise measure
// a run that is not the one predicted.
Status check_executable(const Config& config, std::string_view tool);

// Test hook: the action `action` (text form, "1F3") of iteration
// `iteration` on `rank` throws before it computes anything, or with `kill`
// raises SIGKILL instead (a rank's process dying under the MPI backend; with
// the threads backend, the whole process).
struct FailAt {
  int rank = 0;
  std::string action;
  int iteration = 0;
  bool kill = false;
};

struct RunSettings {
  int iterations = 1;
  double learning_rate = 0.1;
  std::optional<FailAt> fail_at;
};

// The trained weights of one stage, tensor by tensor, converted to double.
// Block tensors are named by their global block index ("block2.w_qkv"), so
// runs that split the layers differently compare by name.
struct StageWeights {
  int stage = 0;
  std::vector<std::string> names;
  std::vector<std::vector<double>> tensors;
};

struct RunResult {
  // The measured run (empty for run_sequential): actions iteration-major in
  // program order, times in picoseconds since the run started.
  Timeline timeline;
  std::vector<StageWeights> weights;  // per stage, after the last step
  std::vector<double> losses;         // per iteration, the batch-mean loss
  // Per stage (measured runs): the most weight versions it held at once (1
  // unless the schedule steps inside its programs), and the bytes of one.
  std::vector<int> weight_versions;
  std::vector<int64_t> weight_bytes;
};

// Runs `settings.iterations` iterations of `schedule` with one thread per
// rank. Returns an Error for an invalid schedule (or one where some stages
// step in S actions and others never), a model the schedule cannot split
// (layers % num_stages != 0, slices longer than the sequence, ...), or a
// failure on a rank:
// "rank 1, 1F3: <what>", returned once every rank has stopped.
Result<RunResult> run_threads(const Schedule& schedule, const RuntimeModel& model,
                              const RunSettings& settings);

// The reference: one thread, one stage holding the whole model, microbatch
// by microbatch, whole sequences. `num_microbatches` per iteration as the
// schedule it is compared with. fail_at is ignored.
Result<RunResult> run_sequential(const RuntimeModel& model, int num_microbatches,
                                 const RunSettings& settings);

// The reference for a schedule that steps inside its programs (S actions:
// PipeDream, PipeDream-2BW), or any other: the same model and data on one
// thread, microbatch by microbatch in order, whole sequences, but with the
// schedule's delays. Each stage keeps every weight version (version k: after
// k of its steps; versions count on across iterations). Microbatch mb runs
// every stage at the version that stage had when, in its rank's program,
// its F of mb came (the stage's S actions before it), and its gradient on a
// stage is applied by the stage's first S after its B or W (S is SGD on the
// newest version with the gradients gathered since the previous S). A
// schedule without S actions steps every stage once after its program, so
// the reference equals run_sequential's training. Error for an invalid
// schedule, a model it cannot split, or a stage that never steps while
// others do. The timeline is empty; fail_at is ignored.
Result<RunResult> run_delayed_reference(const Schedule& schedule, const RuntimeModel& model,
                                        const RunSettings& settings);

// The largest relative difference between two sets of weights, tensor by
// tensor matched by name: max |a - b| / max |b| over each tensor's entries
// (norm-wise, so a bias that starts at zero does not divide by ~0). Error
// when the two sets do not hold the same tensors with the same sizes.
Result<double> max_relative_error(const std::vector<StageWeights>& a,
                                  const std::vector<StageWeights>& b);

}  // namespace ppsim::runtime
