// The threads backend: one std::thread per rank runs that rank's program,
// iteration after iteration, against its own StageComputes; tensors between
// ranks travel through the receivers' Mailboxes. See runtime.h.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "real_runtime/mailbox.h"
#include "real_runtime/runtime.h"
#include "real_runtime/stage_compute.h"
#include "schedules/validate.h"

namespace ppsim::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// What one rank measured; merged into the Timeline after the threads join.
struct RankLog {
  std::vector<TransferRecord> transfers;
  std::vector<EpilogueRecord> epilogue;
  std::vector<double> losses;  // per iteration; only the last stage's rank adds to it
  Picos busy = 0;
  int64_t held = 0, peak = 0;
};

template <typename S>
class ThreadsRun {
 public:
  ThreadsRun(const Schedule& schedule, const RuntimeModel& model, const RunSettings& settings,
             const std::vector<int>& lengths, std::optional<Action> fail_action)
      : schedule_(schedule),
        settings_(settings),
        fail_action_(fail_action),
        lengths_(lengths),
        transfer_rows_(static_cast<int64_t>(model.micro_batch) * model.hidden),
        logs_(schedule.num_ranks) {
    for (int s = 0; s < schedule.num_stages; ++s) {
      stages_.push_back(std::make_unique<StageCompute<S>>(model, s, schedule.num_stages,
                                                          schedule.num_microbatches, lengths));
    }
    for (int r = 0; r < schedule.num_ranks; ++r) {
      mailboxes_.push_back(std::make_unique<Mailbox<S>>(&control_));
      control_.add(mailboxes_.back().get());
    }
    barrier_ = std::make_unique<AbortableBarrier>(schedule.num_ranks, &control_);
    control_.add(barrier_.get());
    per_iteration_ = static_cast<int64_t>(schedule.num_actions());
    int32_t offset = 0;
    for (const auto& program : schedule.programs) {
      program_offset_.push_back(offset);
      offset += static_cast<int32_t>(program.size());
    }
    actions_.resize(per_iteration_ * settings.iterations);
  }

  Result<RunResult> run() {
    start_ = Clock::now();
    std::vector<std::thread> threads;
    try {
      for (int r = 0; r < schedule_.num_ranks; ++r) {
        threads.emplace_back([this, r] { rank_main(r); });
      }
    } catch (const std::system_error& e) {
      // The ranks already started would wait for the missing one forever.
      control_.fail(fmt::format("rank {}: cannot start its thread: {}", threads.size(), e.what()));
    }
    for (std::thread& t : threads) t.join();
    if (control_.aborted()) return Error{control_.error()};
    return collect();
  }

 private:
  Picos now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count() *
           1000;
  }

  // The thread boundary: nothing thrown inside a rank leaves it.
  void rank_main(int rank) {
    std::string where = "start";
    try {
      for (int it = 0; it < settings_.iterations; ++it) {
        const auto& program = schedule_.programs[rank];
        for (size_t pos = 0; pos < program.size(); ++pos) {
          where = to_string(program[pos]);
          const int32_t index =
              static_cast<int32_t>(it * per_iteration_ + program_offset_[rank] + pos);
          execute(rank, it, program[pos], index);
        }
        where = "optimizer step";
        epilogue(rank, it);
      }
    } catch (const Aborted&) {
      // Another rank failed and reported it.
    } catch (const std::exception& e) {
      control_.fail(fmt::format("rank {}, {}: {}", rank, where, e.what()));
    } catch (...) {
      control_.fail(fmt::format("rank {}, {}: unknown exception", rank, where));
    }
  }

  typename Mailbox<S>::Key key(MessageKind kind, const Action& a, int stage) const {
    return {kind, a.microbatch, stage, a.slice};
  }

  // Receives the input of `index` from the rank of stage `from`.
  kernels::Mat<S> receive(int rank, MessageKind kind, const Action& a, int32_t index) {
    Message<S> m = mailboxes_[rank]->take(key(kind, a, a.stage));
    if (m.src_rank != rank) {
      logs_[rank].transfers.push_back(TransferRecord{m.producer, index, m.send_start, m.send_end});
    }
    return std::move(m.data);
  }

  void send(MessageKind kind, const Action& a, int to_stage, kernels::Mat<S> data, int rank,
            int32_t index) {
    Message<S> m;
    m.producer = index;
    m.src_rank = rank;
    m.send_start = now();
    m.data = std::move(data);
    const int dst = schedule_.stage_rank[to_stage];
    // A cross-rank send copies, as a link would; the time it takes is the transfer.
    if (dst != rank) m.data = kernels::Mat<S>(m.data);
    m.send_end = now();
    mailboxes_[dst]->put(key(kind, a, to_stage), std::move(m));
  }

  void execute(int rank, int it, const Action& a, int32_t index) {
    if (fail_action_ && settings_.fail_at->rank == rank && settings_.fail_at->iteration == it &&
        *fail_action_ == a) {
      throw std::runtime_error("injected failure (RunSettings::fail_at)");
    }
    StageCompute<S>& stage = *stages_[a.stage];
    RankLog& log = logs_[rank];
    const int64_t held_before = stage.held_bytes(a.microbatch, a.slice);
    kernels::Mat<S> in, out;
    bool send_out = false;
    int to_stage = 0;
    MessageKind out_kind = MessageKind::kActivation;
    if (a.kind == ActionKind::kForward && !stage.first()) {
      in = receive(rank, MessageKind::kActivation, a, index);
    } else if (sends_input_gradient(a.kind) && !stage.last()) {
      in = receive(rank, MessageKind::kGradient, a, index);
    }
    ActionRecord& record = actions_[index];
    record = ActionRecord{a, rank, it, now(), 0};
    switch (a.kind) {
      case ActionKind::kForward: {
        // Only the last stage computes a loss; the others get no slot for one.
        double* loss = nullptr;
        if (stage.last()) {
          log.losses.resize(settings_.iterations, 0.0);
          loss = &log.losses[it];
        }
        out = stage.forward(it, a.microbatch, a.slice, in, loss);
        send_out = !stage.last();
        to_stage = a.stage + 1;
        break;
      }
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        out = a.kind == ActionKind::kBackward ? stage.backward(it, a.microbatch, a.slice, in)
                                              : stage.backward_input(a.microbatch, a.slice, in);
        send_out = !stage.first();
        to_stage = a.stage - 1;
        out_kind = MessageKind::kGradient;
        break;
      case ActionKind::kBackwardWeight:
        stage.backward_weight(it, a.microbatch, a.slice);
        break;
      case ActionKind::kStep:
        throw std::logic_error("S actions (asynchronous schedules) are not supported");
    }
    record.end = now();
    log.busy += record.end - record.start;
    log.held += stage.held_bytes(a.microbatch, a.slice) - held_before;
    log.peak = std::max(log.peak, log.held);
    if (send_out) send(out_kind, a, to_stage, std::move(out), rank, index);
  }

  void epilogue(int rank, int it) {
    RankLog& log = logs_[rank];
    // Synchronous step: every rank waits for the whole pipeline first.
    const Picos sync_start = now();
    barrier_->arrive_and_wait();
    const Picos step_start = now();
    log.epilogue.push_back({EpilogueKind::kPipelineSync, rank, it, sync_start, step_start});
    for (int s = 0; s < schedule_.num_stages; ++s) {
      if (schedule_.stage_rank[s] == rank) stages_[s]->sgd_step(settings_.learning_rate);
    }
    log.epilogue.push_back({EpilogueKind::kOptimizerStep, rank, it, step_start, now()});
  }

  RunResult collect() {
    RunResult result;
    Timeline& t = result.timeline;
    t.num_ranks = schedule_.num_ranks;
    t.iterations = settings_.iterations;
    t.actions = std::move(actions_);
    t.num_slices = schedule_.num_slices;
    t.iteration_end.assign(settings_.iterations, 0);
    t.static_bytes.assign(schedule_.num_ranks, 0);
    for (int r = 0; r < schedule_.num_ranks; ++r) {
      RankLog& log = logs_[r];
      t.transfers.insert(t.transfers.end(), log.transfers.begin(), log.transfers.end());
      t.epilogue.insert(t.epilogue.end(), log.epilogue.begin(), log.epilogue.end());
      t.busy.push_back(log.busy);
      t.peak_activation_bytes.push_back(log.peak);
    }
    result.losses = logs_[schedule_.stage_rank[schedule_.num_stages - 1]].losses;
    std::sort(t.transfers.begin(), t.transfers.end(),
              [](const TransferRecord& a, const TransferRecord& b) {
                return std::tie(a.start, a.producer) < std::tie(b.start, b.producer);
              });
    std::sort(
        t.epilogue.begin(), t.epilogue.end(), [](const EpilogueRecord& a, const EpilogueRecord& b) {
          return std::tie(a.iteration, a.kind, a.rank) < std::tie(b.iteration, b.kind, b.rank);
        });
    for (const EpilogueRecord& e : t.epilogue) {
      t.iteration_end[e.iteration] = std::max(t.iteration_end[e.iteration], e.end);
      t.makespan = std::max(t.makespan, e.end);
    }
    for (const ActionRecord& a : t.actions) t.makespan = std::max(t.makespan, a.end);
    for (int s = 0; s < schedule_.num_stages; ++s) {
      for (int j = 0; j < schedule_.num_slices; ++j) {
        t.stage_memory.push_back(
            {stages_[s]->activation_bytes(j), stages_[s]->weight_grad_bytes(j)});
      }
      result.weights.push_back(stages_[s]->weights());
    }
    for (int s = 0; s + 1 < schedule_.num_stages; ++s) {
      for (int j = 0; j < schedule_.num_slices; ++j) {
        t.p2p_bytes.push_back(transfer_rows_ * lengths_[j] * static_cast<int64_t>(sizeof(S)));
      }
    }
    return result;
  }

  const Schedule& schedule_;
  const RunSettings& settings_;
  std::optional<Action> fail_action_;
  std::vector<int> lengths_;
  int64_t transfer_rows_;  // micro_batch * hidden: scalars per token of a transfer
  RunControl control_;
  std::vector<std::unique_ptr<StageCompute<S>>> stages_;
  std::vector<std::unique_ptr<Mailbox<S>>> mailboxes_;
  std::unique_ptr<AbortableBarrier> barrier_;
  std::vector<RankLog> logs_;
  std::vector<ActionRecord> actions_;
  std::vector<int32_t> program_offset_;
  int64_t per_iteration_ = 0;
  Clock::time_point start_;
};

Status check_schedule(const Schedule& schedule) {
  if (Status st = validate(schedule); !st) return st;
  for (const auto& program : schedule.programs) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kStep) {
        return Error{fmt::format(
            "schedule {}: asynchronous schedules (S actions such as {}) are not supported by the "
            "threads runtime yet",
            schedule.name, to_string(a))};
      }
    }
  }
  return {};
}

}  // namespace

Result<RunResult> run_threads(const Schedule& schedule, const RuntimeModel& model,
                              const RunSettings& settings) {
  if (Status st = check_schedule(schedule); !st) return Error{st.message()};
  if (Status st = check_model(model, schedule.num_stages); !st) return Error{st.message()};
  if (settings.iterations < 1) {
    return Error{
        fmt::format("run settings: iterations must be at least 1, got {}", settings.iterations)};
  }
  Result<std::vector<int>> lengths = slice_lengths(model, schedule.num_slices);
  if (!lengths) return lengths.error();
  std::optional<Action> fail_action;
  if (settings.fail_at) {
    Result<Action> a = parse_action(settings.fail_at->action);
    if (!a) return a.error();
    fail_action = *a;
  }
  auto go = [&](auto tag) -> Result<RunResult> {
    using S = decltype(tag);
    ThreadsRun<S> run(schedule, model, settings, *lengths, fail_action);
    return run.run();
  };
  try {
    if (model.precision == Precision::kFloat64) return go(double{});
    return go(float{});
  } catch (const std::exception& e) {  // allocating the model or the timeline
    return Error{fmt::format("threads runtime: {}", e.what())};
  }
}

}  // namespace ppsim::runtime
