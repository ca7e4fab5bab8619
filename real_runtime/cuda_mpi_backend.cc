// The CUDA backend over several GPUs (cuda_mpi.h): this process runs one
// rank's RankExecutor over GpuStages on a GPU of its own; an NcclTransport
// carries its tensors by NCCL send/receive, each announced by a header over
// MPI (ordered_links.h); at the end every rank's log and device spans are
// gathered to every rank, as the MPI backend gathers its logs.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "real_runtime/cuda_common.h"
#include "real_runtime/cuda_mpi.h"
#include "real_runtime/mpi.h"
#include "real_runtime/mpi_internal.h"
#include "real_runtime/ordered_links.h"

namespace ppsim::runtime {
namespace {

constexpr int kHeaderTag = 1;    // a tensor's header, ahead of its data
constexpr int kUniqueIdTag = 2;  // a link's ncclUniqueId, at setup

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

void nccl_ok(ncclResult_t e, const char* what) {
  if (e != ncclSuccess)
    throw std::runtime_error(fmt::format("{}: {}", what, ncclGetErrorString(e)));
}

// An event that orders one stream after another or tells the host that a
// receive is done.
class Event {
 public:
  Event() { cuda_ok(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreate"); }
  ~Event() {
    if (e_ != nullptr) cudaEventDestroy(e_);
  }
  Event(Event&& other) noexcept : e_(std::exchange(other.e_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// One direction between two ranks: a communicator of the two (the sender
// its rank 0, the receiver its rank 1) and this process's stream for it.
struct Link {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// This rank's links, made together by every rank: for each direction the
// schedule uses, in the same (sorted) order on every process, its two ranks
// exchange an ncclUniqueId over MPI and join its communicator. Each rank
// joins in that order, so no two ranks wait for each other in opposite
// orders.
class NcclLinks {
 public:
  // REQUIRES: the rank's device current.
  NcclLinks(const std::vector<DirectedLink>& links, int rank) {
    try {
      for (const DirectedLink& l : links) {
        if (l.src != rank && l.dst != rank) continue;
        const bool sender = l.src == rank;
        Link& link = sender ? to_[l.dst] : from_[l.src];
        cuda_ok(cudaStreamCreateWithFlags(&link.stream, cudaStreamNonBlocking), "cudaStreamCreate");
        ncclUniqueId id;
        if (sender) {
          nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
          MPI_Send(&id, sizeof(id), MPI_BYTE, l.dst, kUniqueIdTag, MPI_COMM_WORLD);
        } else {
          MPI_Recv(&id, sizeof(id), MPI_BYTE, l.src, kUniqueIdTag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
        }
        nccl_ok(ncclCommInitRank(&link.comm, 2, id, sender ? 0 : 1),
                fmt::format("ncclCommInitRank (link {} -> {})", l.src, l.dst).c_str());
      }
    } catch (...) {
      release(true);
      throw;
    }
  }
  // After a failed run: aborts the communicators (a peer's operation may
  // never come).
  ~NcclLinks() { release(true); }
  NcclLinks(const NcclLinks&) = delete;
  NcclLinks& operator=(const NcclLinks&) = delete;

  // After every send was received.
  void close() { release(false); }
  Link& to(int dst) { return to_.at(dst); }
  Link& from(int src) { return from_.at(src); }
  const std::map<int, Link>& outgoing() const { return to_; }

 private:
  void release(bool abort) {
    for (std::map<int, Link>* links : {&to_, &from_}) {
      for (auto& [peer, link] : *links) {
        if (link.comm != nullptr) abort ? ncclCommAbort(link.comm) : ncclCommDestroy(link.comm);
        if (link.stream != nullptr) cudaStreamDestroy(link.stream);
      }
      links->clear();
    }
  }

  std::map<int, Link> to_, from_;  // by peer rank
};

// What goes over MPI ahead of a tensor.
struct Header {
  MessageKey key;
  int32_t producer = 0;
  int32_t src_rank = 0;
  Picos send_start = 0;
  int64_t rows = 0, cols = 0;
  int32_t type = 0;  // DType
};
static_assert(std::is_trivially_copyable_v<Header>);

int64_t tensor_bytes(int64_t rows, int64_t cols, DType type) {
  return rows * cols * dtype_bytes(type);
}

class NcclTransport : public MpiRankTransport<gpu::DeviceMatrix> {
 public:
  NcclTransport(const Schedule& schedule, int rank, const RunClock* clock, DeathWatch* watch,
                gpu::GpuContext* ctx, gpu::GpuTracer* tracer)
      : MpiRankTransport(watch),
        schedule_(schedule),
        rank_(rank),
        clock_(clock),
        ctx_(ctx),
        tracer_(tracer) {}
  // Before the run: every call below needs the links.
  void attach(NcclLinks* links) { links_ = links; }

  void send(int dst_rank, const MessageKey& key, Message<gpu::DeviceMatrix> m) override {
    complete_sends(false);
    if (dst_rank == rank_) {  // a hand-off between two stages of this rank
      local_[key].push_back(std::move(m));
      return;
    }
    Link& link = links_->to(dst_rank);
    const gpu::DeviceMatrix& d = m.data;
    const int64_t bytes = tensor_bytes(d.rows, d.cols, d.type);
    PPSIM_CHECK(d.buffer.bytes() >= bytes);
    const Header h{
        key, m.producer, m.src_rank, m.send_start, d.rows, d.cols, static_cast<int32_t>(d.type)};
    std::vector<char> header(sizeof(h));
    std::memcpy(header.data(), &h, sizeof(h));
    post(std::move(header), dst_rank, kHeaderTag);
    // After the work that produced it, on the link's stream, which then
    // frees it: the sender does not wait for the receiver.
    cuda_ok(cudaEventRecord(ready_.get(), static_cast<cudaStream_t>(ctx_->stream())),
            "cudaEventRecord");
    cuda_ok(cudaStreamWaitEvent(link.stream, ready_.get(), 0), "cudaStreamWaitEvent");
    nccl_ok(ncclSend(d.data(), static_cast<size_t>(bytes), ncclUint8, 1, link.comm, link.stream),
            "ncclSend");
    m.data.buffer.set_stream(link.stream);
  }

  Message<gpu::DeviceMatrix> receive(int /*rank*/, const MessageKey& key) override {
    const int src = producer_rank(schedule_, key);
    if (src == rank_) {
      auto it = local_.find(key);
      if (it == local_.end()) {
        throw std::logic_error(fmt::format(
            "rank {}: the {} for stage {}, microbatch {}, slice {} was not produced before it is "
            "needed",
            rank_, key.kind == MessageKind::kActivation ? "activation" : "gradient", key.stage,
            key.microbatch, key.slice));
      }
      Message<gpu::DeviceMatrix> m = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) local_.erase(it);
      return m;
    }
    Posted posted = receiver_.take(src, key, [this](int s) { return post_next(s); });
    cuda_ok(cudaEventSynchronize(posted.done.get()), "the receive (cudaEventSynchronize)");
    Message<gpu::DeviceMatrix> m;
    m.send_end = clock_->now();
    m.producer = posted.header.producer;
    m.src_rank = posted.header.src_rank;
    m.send_start = posted.header.send_start;
    m.data = std::move(posted.data);
    m.data.buffer.set_stream(ctx_->stream());  // the receiver frees it
    return m;
  }

  void barrier(int /*rank*/) override {
    complete_sends(true);  // every send of the iteration is received before its barrier
    MPI_Barrier(MPI_COMM_WORLD);
  }
  void compute_begin(int /*rank*/, uint64_t id) override { begin_compute(tracer_, *ctx_, id); }
  void compute_end(int /*rank*/, uint64_t id) override { end_compute(tracer_, *ctx_, id); }
  // Waits until every send was received.
  void finish_sends() { complete_sends(true); }

 private:
  // A receive posted on a link's stream, in the sender's order.
  struct Posted {
    Header header;
    gpu::DeviceMatrix data;
    Event done;
  };

  // The next tensor `src` sent this rank: its header, then its receive.
  std::pair<MessageKey, Posted> post_next(int src) {
    Posted p;
    MPI_Recv(&p.header, sizeof(Header), MPI_BYTE, src, kHeaderTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    const Header& h = p.header;
    PPSIM_CHECK(h.src_rank == src && h.rows >= 0 && h.cols >= 0);
    Link& link = links_->from(src);
    const auto type = static_cast<DType>(h.type);
    const int64_t bytes = tensor_bytes(h.rows, h.cols, type);
    p.data.rows = h.rows;
    p.data.cols = h.cols;
    p.data.type = type;
    p.data.buffer = value_or_throw(gpu::DeviceBuffer::allocate(bytes, link.stream));
    nccl_ok(
        ncclRecv(p.data.data(), static_cast<size_t>(bytes), ncclUint8, 0, link.comm, link.stream),
        "ncclRecv");
    cuda_ok(cudaEventRecord(p.done.get(), link.stream), "cudaEventRecord");
    return {h.key, std::move(p)};
  }

  // Frees the headers MPI has sent; with `all`, also waits for every
  // tensor to be received.
  void complete_sends(bool all) {
    complete_posts(all);
    if (!all) return;
    for (const auto& [peer, link] : links_->outgoing()) {
      cuda_ok(cudaStreamSynchronize(link.stream), "a send (cudaStreamSynchronize)");
    }
  }

  const Schedule& schedule_;
  int rank_;
  const RunClock* clock_;
  gpu::GpuContext* ctx_;
  gpu::GpuTracer* tracer_;
  NcclLinks* links_ = nullptr;
  Event ready_;
  InOrderReceiver<Posted> receiver_;
  std::map<MessageKey, std::deque<Message<gpu::DeviceMatrix>>> local_;
};

// Every rank's status, on every rank: ok when no rank failed, else the
// failures, "ranks 0, 1: <what>; rank 2: <what>" (the ranks that said the
// same thing together). Collective.
Status agree(const Status& mine, int num_ranks) {
  const std::vector<std::string> all =
      all_gather_texts(mine ? std::string() : mine.message(), num_ranks);
  std::vector<std::pair<std::string, std::vector<int>>> failures;  // in rank order
  for (int r = 0; r < num_ranks; ++r) {
    if (all[r].empty()) continue;
    const std::string& what = all[r];
    auto it = std::find_if(failures.begin(), failures.end(),
                           [&](const auto& f) { return f.first == what; });
    if (it == failures.end()) it = failures.insert(failures.end(), {what, {}});
    it->second.push_back(r);
  }
  if (failures.empty()) return {};
  std::string joined;
  for (const auto& [what, ranks] : failures) {
    joined += fmt::format("{}{} {}: {}", joined.empty() ? "" : "; ",
                          ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "), what);
  }
  return Error{"cuda backend over NCCL: " + joined};
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

// The spans of every rank, gathered, or the first rank's reason for none.
Result<std::vector<DeviceSpan>> gather_spans(const Result<std::vector<DeviceSpan>>& mine,
                                             int num_ranks) {
  Writer w;
  w.pod(static_cast<int32_t>(mine.ok()));
  if (mine) {
    w.pods(*mine);
  } else {
    w.text(mine.error().message);
  }
  std::vector<DeviceSpan> all;
  const std::vector<std::vector<char>> bytes = all_gather_bytes(w.bytes(), num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    Reader reader(bytes[r].data(), bytes[r].data() + bytes[r].size());
    if (reader.pod<int32_t>() == 0) return Error{fmt::format("rank {}: {}", r, reader.text())};
    std::vector<DeviceSpan> spans = reader.pods<DeviceSpan>();
    all.insert(all.end(), spans.begin(), spans.end());
  }
  return all;
}

Result<RunResult> run_rank(const RunPlan& plan, const CudaRunOptions& options, CudaRunInfo* info) {
  const Schedule& schedule = *plan.schedule;
  const int rank = mpi_rank();
  const int num_ranks = schedule.num_ranks;
  DeathWatch watch;
  RunClock clock;
  // Declared so that each is destroyed before what it uses: the stages and
  // the transport's buffers before the links' streams, those before the context.
  Result<std::unique_ptr<gpu::GpuTracer>> tracer = gpu::GpuTracer::start();
  gpu::GpuTracer* tr = tracer ? tracer->get() : nullptr;
  std::unique_ptr<gpu::GpuContext> ctx;
  std::unique_ptr<NcclLinks> links;
  std::unique_ptr<NcclTransport> transport;
  std::unique_ptr<RankExecutor<GpuStage>> executor;
  std::string placement;

  // The setup, agreed on by every rank before any NCCL call.
  Status setup;
  try {
    std::string why;
    const int devices = gpu::device_count(&why);
    const int device = options.device + watch.host_rank();
    if (devices == 0) {
      setup = Error{why};
    } else if (device >= devices) {
      setup = Error{fmt::format(
          "rank {} of the {} on host {} would run on device {}, but the host has {} GPU(s): "
          "NCCL needs a GPU per rank (on one GPU, run without mpirun: --backend cuda puts every "
          "rank on it)",
          watch.host_rank(), watch.host_ranks(), host_name(), device, devices)};
    } else {
      ctx = value_or_throw(gpu::GpuContext::create(device));
      placement = fmt::format("{}, host {}", ctx->placement(), host_name());
      transport = std::make_unique<NcclTransport>(schedule, rank, &clock, &watch, ctx.get(), tr);
      executor = std::make_unique<RankExecutor<GpuStage>>(plan, rank, transport.get(), &clock,
                                                          gpu_stage_factory(plan, ctx.get()));
    }
  } catch (const std::exception& e) {
    setup = Error{fmt::format("setup: {}", e.what())};
  }
  if (Status all = agree(setup, num_ranks); !all) {
    watch.close();  // every rank is here
    if (info != nullptr) info->failed_on_every_rank = true;
    return Error{all.message()};
  }
  try {
    links = std::make_unique<NcclLinks>(directed_links(schedule), rank);
  } catch (const std::exception& e) {
    watch.reported();
    return Error{fmt::format("rank {}, setup: {}", rank, e.what())};
  }
  transport->attach(links.get());

  start_common_clock(watch, &clock);
  if (!executor->run()) return Error{transport->error()};
  RunResult result;
  std::string timing = timing_of(tracer);
  try {
    transport->finish_sends();
    Result<std::vector<DeviceSpan>> spans =
        tr != nullptr
            ? action_spans(tr->finish())
            : Result<std::vector<DeviceSpan>>(Error{"no tracer: " + tracer.error().message});
    std::vector<RankLog> logs = all_gather_logs(executor->log(), num_ranks);
    Result<std::vector<DeviceSpan>> all_spans = gather_spans(spans, num_ranks);
    const std::vector<std::string> placements = all_gather_texts(placement, num_ranks);
    const std::vector<std::string> timings = all_gather_texts(timing, num_ranks);
    links->close();
    watch.close();
    result = assemble(plan, dtype_bytes(plan.model.dtype), std::move(logs));
    // Each rank's clock is its own device's: one offset per rank.
    std::vector<int> device_of_rank(num_ranks);
    std::iota(device_of_rank.begin(), device_of_rank.end(), 0);
    timing = timings[0];
    for (int r = 1; r < num_ranks; ++r) {
      if (timings[r] != timings[0]) timing += fmt::format("; rank {}: {}", r, timings[r]);
    }
    use_device_spans(all_spans, device_of_rank, &result.timeline, &timing);
    if (info != nullptr) info->placements = placements;
  } catch (const std::exception& e) {
    watch.reported();
    return Error{fmt::format("rank {}, after the run: {}", rank, e.what())};
  }
  if (info != nullptr) {
    info->sharing =
        fmt::format("one process per GPU, {} ranks; NCCL send/receive between them", num_ranks);
    info->timing = timing;
  }
  return result;
}

}  // namespace

Result<RunResult> run_cuda_mpi(const Schedule& schedule, const RuntimeModel& model,
                               const RunSettings& settings, const CudaRunOptions& options,
                               CudaRunInfo* info) {
  if (info != nullptr) *info = CudaRunInfo{};
  const auto alike = [&](const Error& e) {
    if (info != nullptr) info->failed_on_every_rank = true;
    return e;
  };
  Result<RunPlan> plan = plan_cuda_run(schedule, model, settings, "cuda backend over NCCL");
  if (!plan) return alike(plan.error());
  if (Status st = check_world_size(schedule, "cuda"); !st) return alike(Error{st.message()});
  return run_rank(*plan, options, info);
}

}  // namespace ppsim::runtime
