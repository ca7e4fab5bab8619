// The CUDA backend (cuda.h): one thread per rank, each with its GpuContext
// (a green context of its own group of SMs, or a plain stream), its
// RankExecutor over GpuStages and its mailbox; the GpuTracer of the
// process brackets every action. All of a rank's GPU work, from creating its
// context to destroying it, runs on the rank's thread, where its green
// context is current.
#include <fmt/format.h>

#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "real_runtime/cuda.h"
#include "real_runtime/cuda_common.h"
#include "real_runtime/mailbox.h"

namespace ppsim::runtime {
namespace {

// In-process links between the ranks' streams; the compute bracket waits
// for the rank's stream and marks its work for the tracer.
class CudaTransport : public InProcessTransport<gpu::DeviceMatrix> {
 public:
  CudaTransport(int num_ranks, const RunClock* clock, gpu::GpuTracer* tracer)
      : InProcessTransport(num_ranks, clock), contexts_(num_ranks, nullptr), tracer_(tracer) {}

  // Each rank's thread, before the ranks start.
  void set_context(int rank, gpu::GpuContext* ctx) { contexts_[rank] = ctx; }

  void send(int dst_rank, const MessageKey& key, Message<gpu::DeviceMatrix> m) override {
    if (dst_rank != m.src_rank) {
      // The link: a copy into a buffer of the device, on the sender's
      // stream; the transfer ends when it is there.
      gpu::GpuContext& ctx = *contexts_[m.src_rank];
      gpu::DeviceMatrix copy = value_or_throw(gpu::copy_matrix(ctx, m.data));
      throw_if_failed(ctx.synchronize());
      m.data = std::move(copy);
    }
    deliver(dst_rank, key, std::move(m));
  }
  Message<gpu::DeviceMatrix> receive(int rank, const MessageKey& key) override {
    Message<gpu::DeviceMatrix> m = InProcessTransport::receive(rank, key);
    m.data.buffer.set_stream(contexts_[rank]->stream());  // the receiver frees it
    return m;
  }
  void compute_begin(int rank, uint64_t id) override {
    begin_compute(tracer_, *contexts_[rank], id);
  }
  void compute_end(int rank, uint64_t id) override { end_compute(tracer_, *contexts_[rank], id); }

 private:
  std::vector<gpu::GpuContext*> contexts_;
  gpu::GpuTracer* tracer_;
};

}  // namespace

Result<RunResult> run_cuda(const Schedule& schedule, const RuntimeModel& model,
                           const RunSettings& settings, const CudaRunOptions& options,
                           CudaRunInfo* info) {
  Result<RunPlan> plan_or = plan_cuda_run(schedule, model, settings, "cuda backend");
  if (!plan_or) return plan_or.error();
  const RunPlan& plan = *plan_or;
  std::string why;
  const int devices = gpu::device_count(&why);
  if (devices == 0) return Error{"cuda backend: " + why};
  if (options.device < 0 || options.device >= devices) {
    return Error{
        fmt::format("cuda backend: no device {} (this machine has {})", options.device, devices)};
  }
  const int num_ranks = schedule.num_ranks;
  CudaRunInfo placed;
  std::unique_ptr<gpu::SmPartition> partition;
  if (num_ranks > 1 && options.split_sms) {
    Result<std::unique_ptr<gpu::SmPartition>> p =
        gpu::SmPartition::create(options.device, num_ranks);
    if (p) {
      partition = std::move(*p);
      placed.green_contexts = true;
      placed.sms_per_rank = partition->sms_per_group();
      placed.sharing = fmt::format("green contexts: {} groups of {} of {} SMs", num_ranks,
                                   partition->sms_per_group(), partition->device_sms());
    } else {
      placed.sharing = fmt::format("plain streams sharing all SMs ({})", p.error().message);
    }
  } else {
    placed.sharing = num_ranks > 1 ? "plain streams sharing all SMs (asked for)" : "one stream";
  }
  Result<std::unique_ptr<gpu::GpuTracer>> tracer = gpu::GpuTracer::start();
  placed.timing = timing_of(tracer);
  gpu::GpuTracer* tr = tracer ? tracer->get() : nullptr;

  RunClock clock;
  CudaTransport transport(num_ranks, &clock, tr);
  placed.placements.assign(num_ranks, "");
  std::vector<RankLog> logs(num_ranks);
  Result<gpu::Trace> trace = Error{"not traced"};
  const auto rank_main = [&](int r) {
    // Gates between the phases; false once the run was aborted.
    const auto gate = [&] {
      try {
        transport.barrier(r);
        return true;
      } catch (const Aborted&) {
        return false;
      }
    };
    std::unique_ptr<gpu::GpuContext> ctx;
    std::unique_ptr<RankExecutor<GpuStage>> executor;
    try {
      ctx = value_or_throw(
          gpu::GpuContext::create(options.device, partition.get(), partition ? r : 0));
      placed.placements[r] = ctx->placement();
      transport.set_context(r, ctx.get());
      executor = std::make_unique<RankExecutor<GpuStage>>(plan, r, &transport, &clock,
                                                          gpu_stage_factory(plan, ctx.get()));
    } catch (const std::exception& e) {
      transport.abort_run(fmt::format("rank {}, setup: {}", r, e.what()));
    }
    // Every rank set up (their weights on the device) before the clock starts.
    if (gate()) {
      if (r == 0) clock.start = std::chrono::steady_clock::now();
      if (gate() && executor->run() && gate()) {
        logs[r] = std::move(executor->log());
        // Collected while every rank's context is alive (event timings need them).
        if (r == 0 && tr != nullptr) trace = tr->finish();
        gate();
      }
    }
    executor.reset();  // frees the stages' buffers on the rank's stream
    ctx.reset();
  };
  std::vector<std::thread> threads;
  try {
    for (int r = 0; r < num_ranks; ++r) threads.emplace_back(rank_main, r);
  } catch (const std::system_error& e) {
    transport.abort_run(
        fmt::format("rank {}: cannot start its thread: {}", threads.size(), e.what()));
  }
  for (std::thread& t : threads) t.join();
  if (info != nullptr) *info = placed;
  if (transport.control().aborted()) return Error{transport.control().error()};

  RunResult result = assemble(plan, dtype_bytes(model.dtype), std::move(logs));
  if (tr != nullptr) {
    use_device_spans(action_spans(trace), std::vector<int>(num_ranks, 0), &result.timeline,
                     &placed.timing);
    if (info != nullptr) info->timing = placed.timing;
  }
  return result;
}

}  // namespace ppsim::runtime
