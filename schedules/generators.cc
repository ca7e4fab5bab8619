#include "schedules/generators.h"

#include <fmt/format.h>

#include <algorithm>

#include "schedules/dualpipe.h"
#include "schedules/generator_util.h"
#include "schedules/limits.h"
#include "schedules/pytorch_orders.h"
#include "schedules/zero_bubble.h"

namespace ppsim {
namespace {

constexpr Action forward(int stage, int mb) { return {ActionKind::kForward, stage, mb}; }
constexpr Action backward(int stage, int mb) { return {ActionKind::kBackward, stage, mb}; }

// The generators here that run one stage per rank.
Status check_one_stage(std::string_view kind, const ScheduleParams& params) {
  return generator_util::check_params(kind, params, 1,
                                      "runs one stage per rank (interleaved-1f1b runs several)");
}

}  // namespace

Result<Schedule> make_gpipe(const ScheduleParams& params) {
  if (Status st = check_one_stage("gpipe", params); !st) return Error{st.message()};
  Schedule s = generator_util::make_empty("gpipe", params);
  for (int rank = 0; rank < params.ranks; ++rank) {
    auto& program = s.programs[rank];
    program.reserve(2 * params.microbatches);
    for (int mb = 0; mb < params.microbatches; ++mb) program.push_back(forward(rank, mb));
    for (int mb = 0; mb < params.microbatches; ++mb) program.push_back(backward(rank, mb));
  }
  return s;
}

Result<Schedule> make_1f1b(const ScheduleParams& params) {
  if (Status st = check_one_stage("1f1b", params); !st) return Error{st.message()};
  Schedule s = generator_util::make_empty("1f1b", params);
  const int p = params.ranks;
  const int m = params.microbatches;
  for (int rank = 0; rank < p; ++rank) {
    auto& program = s.programs[rank];
    program.reserve(2 * m);
    const int warmup = std::min(p - 1 - rank, m);
    for (int mb = 0; mb < warmup; ++mb) program.push_back(forward(rank, mb));
    for (int k = 0; k < m - warmup; ++k) {
      program.push_back(forward(rank, warmup + k));
      program.push_back(backward(rank, k));
    }
    for (int mb = m - warmup; mb < m; ++mb) program.push_back(backward(rank, mb));
  }
  return s;
}

Result<Schedule> make_interleaved_1f1b(const ScheduleParams& params) {
  if (Status st = generator_util::check_params("interleaved-1f1b", params, 0, ""); !st) {
    return Error{st.message()};
  }
  const int p = params.ranks;
  const int m = params.microbatches;
  const int v = params.virtual_stages;
  if (m % p != 0) {
    return Error{fmt::format(
        "schedule interleaved-1f1b: the number of microbatches ({}) must be a multiple of "
        "the pipeline size ({}); change training.global_batch or micro_batch",
        m, p)};
  }
  Schedule s = generator_util::make_empty("interleaved-1f1b", params);
  // Megatron-LM's order: the k-th virtual microbatch of a rank belongs to
  // chunk (k mod pv) / p (counted from the last chunk for backward) and to
  // microbatch (k / pv) * p + k mod p. Ranks run ahead by 2 per position
  // before the first backward, plus a full round of p for every extra chunk.
  const int total = m * v;
  auto mb_of = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto chunk_of = [&](int k, bool is_forward) {
    const int chunk = (k % (p * v)) / p;
    return is_forward ? chunk : v - 1 - chunk;
  };
  for (int rank = 0; rank < p; ++rank) {
    auto& program = s.programs[rank];
    program.reserve(2 * total);
    // With one chunk it is 1F1B (Megatron-LM runs its non-interleaved code then).
    const int warmup = v == 1   ? std::min(p - rank - 1, m)
                       : m == p ? total
                                : std::min((p - rank - 1) * 2 + (v - 1) * p, total);
    auto push_forward = [&](int k) {
      program.push_back(forward(chunk_of(k, true) * p + rank, mb_of(k)));
    };
    auto push_backward = [&](int k) {
      program.push_back(backward(chunk_of(k, false) * p + rank, mb_of(k)));
    };
    for (int k = 0; k < warmup; ++k) push_forward(k);
    for (int k = 0; k < total - warmup; ++k) {
      push_forward(k + warmup);
      push_backward(k);
    }
    for (int k = total - warmup; k < total; ++k) push_backward(k);
  }
  return s;
}

std::optional<int> fixed_virtual_stages(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kInterleaved1f1b:
    case ScheduleKind::kLoopedBfs:
    case ScheduleKind::kInterleavedZb:
    case ScheduleKind::kCustom:
      return std::nullopt;
    case ScheduleKind::kZbV:
    case ScheduleKind::kDualPipe:
    case ScheduleKind::kDualPipeV:
      return 2;
    case ScheduleKind::kGpipe:
    case ScheduleKind::k1f1b:
    case ScheduleKind::kZbH1:
    case ScheduleKind::kZbH2:
    case ScheduleKind::kTeraPipe:
    case ScheduleKind::kPipeDream:
    case ScheduleKind::kPipeDream2bw:
    case ScheduleKind::kZbAuto:
      return 1;
  }
  return 1;
}

Result<Schedule> make_terapipe(const ScheduleParams& params) {
  if (Status st = check_one_stage("terapipe", params); !st) return Error{st.message()};
  Schedule s = generator_util::make_empty("terapipe", params);
  s.num_slices = params.slices;
  for (int rank = 0; rank < params.ranks; ++rank) {
    auto& program = s.programs[rank];
    program.reserve(2 * static_cast<size_t>(params.microbatches) * params.slices);
    for (int mb = 0; mb < params.microbatches; ++mb) {
      for (int j = 0; j < params.slices; ++j) {
        program.push_back({ActionKind::kForward, rank, mb, j});
      }
    }
    for (int k = static_cast<int>(program.size()) - 1; k >= 0; --k) {
      Action a = program[k];
      a.kind = ActionKind::kBackward;
      program.push_back(a);
    }
  }
  return s;
}

namespace {

// The no-flush 1F1B stream of the PipeDream family, with a step after the
// backward of every microbatch k for which steps_after(k).
template <typename StepsAfter>
Schedule async_stream(std::string name, const ScheduleParams& params, StepsAfter steps_after) {
  Schedule s = generator_util::make_empty(std::move(name), params);
  const int p = params.ranks;
  const int m = params.microbatches;
  for (int rank = 0; rank < p; ++rank) {
    auto& program = s.programs[rank];
    program.reserve(3 * static_cast<size_t>(m));
    const auto backward_and_step = [&](int k) {
      program.push_back(backward(rank, k));
      if (steps_after(k)) program.push_back({ActionKind::kStep, rank, k});
    };
    const int warmup = std::min(p - 1 - rank, m);
    for (int mb = 0; mb < warmup; ++mb) program.push_back(forward(rank, mb));
    for (int k = 0; k < m - warmup; ++k) {
      program.push_back(forward(rank, warmup + k));
      backward_and_step(k);
    }
    for (int k = m - warmup; k < m; ++k) backward_and_step(k);
  }
  return s;
}

}  // namespace

Result<Schedule> make_pipedream(const ScheduleParams& params) {
  if (Status st = check_one_stage("pipedream", params); !st) return Error{st.message()};
  return async_stream("pipedream", params, [](int) { return true; });
}

Result<Schedule> make_pipedream_2bw(const ScheduleParams& params) {
  if (Status st = check_one_stage("pipedream-2bw", params); !st) return Error{st.message()};
  const int batch = params.step_every;
  if (batch < params.ranks) {
    return Error{fmt::format(
        "schedule pipedream-2bw: needs at least as many microbatches per batch ({}) as pipeline "
        "ranks ({}), or a microbatch would be in flight across two weight updates and two "
        "buffered versions would not suffice; raise training.global_batch",
        batch, params.ranks)};
  }
  if (params.microbatches % batch != 0) {
    return Error{
        fmt::format("schedule pipedream-2bw: a stream of {} microbatches is not whole "
                    "batches of {}",
                    params.microbatches, batch)};
  }
  return async_stream("pipedream-2bw", params, [batch](int k) { return (k + 1) % batch == 0; });
}

bool is_asynchronous(ScheduleKind kind) {
  return kind == ScheduleKind::kPipeDream || kind == ScheduleKind::kPipeDream2bw;
}

namespace generator_util {

Status check_params(std::string_view kind, const ScheduleParams& params, int required_v,
                    std::string_view why) {
  if (params.ranks < 1) {
    return Error{
        fmt::format("schedule {}: needs at least 1 pipeline rank, got {}", kind, params.ranks)};
  }
  if (params.microbatches < 1) {
    return Error{
        fmt::format("schedule {}: needs at least 1 microbatch, got {}", kind, params.microbatches)};
  }
  if (params.virtual_stages < 1) {
    return Error{fmt::format("schedule {}: virtual_stages must be at least 1, got {}", kind,
                             params.virtual_stages)};
  }
  if (required_v > 0 && params.virtual_stages != required_v) {
    return Error{fmt::format("schedule {} {}: virtual_stages must be {}, got {}", kind, why,
                             required_v, params.virtual_stages)};
  }
  if (params.slices < 1) {
    return Error{
        fmt::format("schedule {}: needs at least 1 token slice, got {}", kind, params.slices)};
  }
  const Status size =
      check_schedule_size(params.ranks, int64_t{params.ranks} * params.virtual_stages,
                          params.microbatches, params.slices);
  if (!size) return Error{fmt::format("schedule {}: {}", kind, size.message())};
  return {};
}

Schedule make_empty(std::string name, const ScheduleParams& params) {
  Schedule s;
  s.name = std::move(name);
  s.num_ranks = params.ranks;
  s.num_stages = params.ranks * params.virtual_stages;
  s.num_microbatches = params.microbatches;
  s.stage_rank.resize(s.num_stages);
  for (int stage = 0; stage < s.num_stages; ++stage) s.stage_rank[stage] = stage % params.ranks;
  s.programs.resize(params.ranks);
  return s;
}

}  // namespace generator_util

Result<Schedule> make_schedule(ScheduleKind kind, const ScheduleParams& params) {
  switch (kind) {
    case ScheduleKind::kGpipe:
      return make_gpipe(params);
    case ScheduleKind::k1f1b:
      return make_1f1b(params);
    case ScheduleKind::kInterleaved1f1b:
      return make_interleaved_1f1b(params);
    case ScheduleKind::kZbH1:
      return make_zb_h1(params);
    case ScheduleKind::kZbH2:
      return make_zb_h2(params);
    case ScheduleKind::kZbV:
      return make_zb_v(params);
    case ScheduleKind::kDualPipe:
      return make_dualpipe(params);
    case ScheduleKind::kDualPipeV:
      return make_dualpipev(params);
    case ScheduleKind::kLoopedBfs:
      return make_looped_bfs(params);
    case ScheduleKind::kInterleavedZb:
      return make_interleaved_zb(params);
    case ScheduleKind::kTeraPipe:
      return make_terapipe(params);
    case ScheduleKind::kPipeDream:
      return make_pipedream(params);
    case ScheduleKind::kPipeDream2bw:
      return make_pipedream_2bw(params);
    case ScheduleKind::kZbAuto:
    case ScheduleKind::kCustom:
      break;
  }
  return Error{fmt::format("schedule {} is not generated from (p, m, v) alone", to_string(kind))};
}

}  // namespace ppsim
