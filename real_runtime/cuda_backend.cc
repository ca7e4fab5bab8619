// The CUDA backend (cuda.h): one thread per rank, each with its GpuContext
// (a green context of its own group of SMs, or a plain stream), its
// RankExecutor over GpuStages and its mailbox; the GpuTracer of the
// process brackets every action. All of a rank's GPU work, from creating its
// context to destroying it, runs on the rank's thread, where its green
// context is current.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "real_runtime/cuda.h"
#include "real_runtime/cuda_common.h"
#include "real_runtime/ordered_links.h"
#include "real_runtime/transfer_worker.h"

namespace ppsim::runtime {
namespace {

// A stream of its own for each link a schedule uses, in the device's
// primary context (all of its SMs): the link's thread copies on it.
using LinkContexts = std::map<DirectedLink, std::unique_ptr<gpu::GpuContext>>;

Result<LinkContexts> link_contexts(const Schedule& schedule, int device) {
  LinkContexts links;
  for (const DirectedLink& link : directed_links(schedule)) {
    Result<std::unique_ptr<gpu::GpuContext>> ctx = gpu::GpuContext::create(device);
    if (!ctx) {
      return Error{fmt::format("cuda backend: the link from rank {} to rank {}: {}", link.src,
                               link.dst, ctx.error().message)};
    }
    links.emplace(link, std::move(*ctx));
  }
  return links;
}

// On the link's thread: the receiver's copy of `source`, on the link's
// stream, waited for; `source` is then freed in that stream's order. The
// sender's work on it is done (its compute bracket waited for its stream
// before the send), so the sender's stream need not be ordered before it.
gpu::DeviceMatrix copy_on_link(gpu::GpuContext& link, gpu::DeviceMatrix source) {
  throw_if_failed(link.make_current());
  gpu::DeviceMatrix copy = value_or_throw(gpu::copy_matrix(link, source));
  throw_if_failed(link.synchronize());
  source.buffer.set_stream(link.stream());
  return copy;
}

std::vector<DirectedLink> keys(const LinkContexts& links) {
  std::vector<DirectedLink> out;
  for (const auto& [link, ctx] : links) out.push_back(link);
  return out;
}

// In-process links between the ranks' streams, each copied by a thread and
// a stream of its own (transfer_worker.h), so the sender goes on computing;
// the compute bracket waits for the rank's stream and marks its work for
// the tracer.
class CudaTransport : public CopyingTransport<gpu::DeviceMatrix> {
 public:
  // REQUIRES: `links` outlives the transport's close().
  CudaTransport(int num_ranks, const RunClock* clock, LinkContexts* links, gpu::GpuTracer* tracer)
      : CopyingTransport(num_ranks, clock, keys(*links),
                         [links](gpu::DeviceMatrix m, const DirectedLink& link) {
                           return copy_on_link(*links->at(link), std::move(m));
                         }),
        contexts_(num_ranks, nullptr),
        tracer_(tracer) {}

  // Each rank's thread, before the ranks start.
  void set_context(int rank, gpu::GpuContext* ctx) { contexts_[rank] = ctx; }

  // The link waited for its copy, so the receiver's stream may use and
  // free it.
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
  if (Status st = gpu::check_device(options.device); !st) {
    return Error{"cuda backend: " + st.message()};
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

  Result<LinkContexts> links = link_contexts(schedule, options.device);
  if (!links) return links.error();
  RunClock clock;
  CudaTransport transport(num_ranks, &clock, &*links, tr);
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
  transport.close();
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
