// The MPI backend (mpi.h): this process runs one rank's RankExecutor; an
// MpiTransport carries its tensors as MPI messages; at the end every rank's
// RankLog is gathered to every rank and assembled as the threads backend
// assembles its threads' logs.
#include <errno.h>
#include <fmt/format.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "real_runtime/mpi.h"
#include "real_runtime/mpi_internal.h"
#include "real_runtime/rank_executor.h"

namespace ppsim::runtime {

// ---- Naming a rank that dies -------------------------------------------
//
// Each rank keeps what it is doing in a table shared by the ranks of its
// host (an MPI shared-memory window). When one dies, mpirun ends the others
// with SIGTERM; their handler looks for a rank of the table whose process
// is gone (mpirun has reaped it by then) and prints its last action. Only
// async-signal-safe calls in the handler: atomics, kill, write.

struct RankSlot {
  std::atomic<int32_t> rank;
  std::atomic<int32_t> pid;
  std::atomic<int32_t> state;
  std::atomic<int32_t> iteration;
  std::atomic<char> what[48];
};

// The table: a header, then one slot per rank of the host.
struct HostHeader {
  std::atomic<int32_t> reported;  // a survivor has printed
};

namespace {

enum RankState : int32_t { kRunning = 0, kReported = 1, kDone = 2 };

constexpr size_t kSlotsOffset =
    (sizeof(HostHeader) + alignof(RankSlot) - 1) / alignof(RankSlot) * alignof(RankSlot);

static_assert(std::atomic<int32_t>::is_always_lock_free && std::atomic<char>::is_always_lock_free,
              "the table is read from a signal handler in other processes");

// What the handler reads (set while a DeathWatch is installed).
std::atomic<HostHeader*> g_header{nullptr};
RankSlot* g_slots = nullptr;
int g_host_ranks = 0;
int g_host_self = 0;
struct sigaction g_old_sigterm;

// Appends text or a number to a buffer, without allocating.
struct SafeText {
  char buf[160];
  size_t n = 0;
  void add(const char* s) {
    while (*s && n < sizeof(buf)) buf[n++] = *s++;
  }
  void add(int64_t v) {
    char digits[24];
    int k = 0;
    const bool negative = v < 0;
    uint64_t u = negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    do {
      digits[k++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (negative) add("-");
    while (k > 0 && n < sizeof(buf)) buf[n++] = digits[--k];
  }
};

extern "C" void on_sigterm(int sig) {
  const int saved_errno = errno;
  HostHeader* header = g_header.load();
  for (int i = 0; header != nullptr && i < g_host_ranks; ++i) {
    RankSlot& slot = g_slots[i];
    if (i == g_host_self || slot.state.load() != kRunning) continue;
    if (kill(slot.pid.load(), 0) == 0 || errno != ESRCH) continue;
    int32_t expected = 0;
    if (!header->reported.compare_exchange_strong(expected, 1)) break;  // another survivor did
    SafeText t;
    t.add("ppsim: rank ");
    t.add(slot.rank.load());
    t.add(" died in ");
    char what[sizeof(slot.what) + 1];
    size_t k = 0;
    for (; k < sizeof(slot.what) && slot.what[k].load() != '\0'; ++k) what[k] = slot.what[k];
    what[k] = '\0';
    t.add(what);
    t.add(" (iteration ");
    t.add(slot.iteration.load());
    t.add("); the job was ended\n");
    ssize_t ignored = write(STDERR_FILENO, t.buf, t.n);
    (void)ignored;
    break;
  }
  // The previous disposition (usually: terminate) takes the signal on return.
  sigaction(sig, &g_old_sigterm, nullptr);
  raise(sig);
  errno = saved_errno;
}

}  // namespace

// ---- DeathWatch (mpi_internal.h) -------------------------------------------

DeathWatch::DeathWatch() {
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host_);
  MPI_Comm_rank(host_, &self_);
  MPI_Comm_size(host_, &ranks_);
  char* base = nullptr;
  const MPI_Aint bytes =
      self_ == 0 ? static_cast<MPI_Aint>(kSlotsOffset + ranks_ * sizeof(RankSlot)) : 0;
  MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, host_, &base, &window_);
  MPI_Aint size = 0;
  int unit = 0;
  MPI_Win_shared_query(window_, 0, &size, &unit, &base);
  if (self_ == 0) {
    new (base) HostHeader{0};
    for (int i = 0; i < ranks_; ++i) {
      new (base + kSlotsOffset + i * sizeof(RankSlot)) RankSlot{};
    }
  }
  header_ = reinterpret_cast<HostHeader*>(base);
  slots_ = reinterpret_cast<RankSlot*>(base + kSlotsOffset);
  for (int i = 0; self_ == 0 && i < ranks_; ++i) slots_[i].state.store(kDone);
  MPI_Barrier(host_);
  RankSlot& me = slots_[self_];
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  me.rank.store(world_rank);
  me.pid.store(static_cast<int32_t>(getpid()));
  me.iteration.store(0);
  set(0, "start");
  me.state.store(kRunning);
  // Is world rank 0 on this host? Then its clock is ours.
  int lowest = world_rank;
  MPI_Allreduce(&world_rank, &lowest, 1, MPI_INT, MPI_MIN, host_);
  with_rank0_ = lowest == 0;

  g_slots = slots_;
  g_host_ranks = ranks_;
  g_host_self = self_;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &g_old_sigterm);
  g_header.store(header_);
}

DeathWatch::~DeathWatch() { uninstall(); }

void DeathWatch::set(int iteration, const std::string& what) {
  RankSlot& me = slots_[self_];
  me.iteration.store(iteration);
  const size_t n = std::min(what.size(), sizeof(me.what) - 1);
  for (size_t k = 0; k < n; ++k) me.what[k].store(what[k], std::memory_order_relaxed);
  me.what[n].store('\0');
}

void DeathWatch::reported() { slots_[self_].state.store(kReported); }

void DeathWatch::close() {
  slots_[self_].state.store(kDone);
  uninstall();
  MPI_Win_free(&window_);
  MPI_Comm_free(&host_);
}

void DeathWatch::uninstall() {
  if (g_header.exchange(nullptr) != nullptr) sigaction(SIGTERM, &g_old_sigterm, nullptr);
}

namespace {

void write_log(const RankLog& log, Writer& w) {
  w.pods(log.actions);
  w.pods(log.transfers);
  w.pods(log.epilogue);
  w.pods(log.losses);
  w.pod(log.held);
  w.pod(log.peak);
  w.pod(static_cast<int64_t>(log.stages.size()));
  for (const StageLog& s : log.stages) {
    w.pod(s.stage);
    w.pods(s.memory);
    w.pod(s.weight_versions);
    w.pod(s.weight_bytes);
    w.pod(static_cast<int64_t>(s.weights.names.size()));
    for (size_t k = 0; k < s.weights.names.size(); ++k) {
      w.text(s.weights.names[k]);
      w.pods(s.weights.tensors[k]);
    }
  }
}

RankLog read_log(Reader& r) {
  RankLog log;
  log.actions = r.pods<ActionRecord>();
  log.transfers = r.pods<TransferRecord>();
  log.epilogue = r.pods<EpilogueRecord>();
  log.losses = r.pods<double>();
  log.held = r.pod<int64_t>();
  log.peak = r.pod<int64_t>();
  for (auto stages = r.pod<int64_t>(); stages > 0; --stages) {
    StageLog s;
    s.stage = r.pod<int>();
    s.memory = r.pods<Timeline::StageMemory>();
    s.weight_versions = r.pod<int>();
    s.weight_bytes = r.pod<int64_t>();
    s.weights.stage = s.stage;
    for (auto tensors = r.pod<int64_t>(); tensors > 0; --tensors) {
      s.weights.names.push_back(r.text());
      s.weights.tensors.push_back(r.pods<double>());
    }
    log.stages.push_back(std::move(s));
  }
  PPSIM_CHECK(r.done());
  return log;
}

}  // namespace

std::vector<std::vector<char>> all_gather_bytes(const std::vector<char>& bytes, int num_ranks) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) throw std::length_error("rank log over 2 GiB");
  int size = static_cast<int>(bytes.size());
  std::vector<int> sizes(num_ranks), offsets(num_ranks);
  MPI_Allgather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int64_t total = 0;
  for (int r = 0; r < num_ranks; ++r) {
    if (total > INT_MAX) throw std::length_error("rank logs over 2 GiB");
    offsets[r] = static_cast<int>(total);
    total += sizes[r];
  }
  std::vector<char> all(total);
  MPI_Allgatherv(bytes.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
  std::vector<std::vector<char>> out;
  for (int r = 0; r < num_ranks; ++r) {
    out.emplace_back(all.data() + offsets[r], all.data() + offsets[r] + sizes[r]);
  }
  return out;
}

std::vector<std::string> all_gather_texts(const std::string& mine, int num_ranks) {
  std::vector<std::string> out;
  for (const std::vector<char>& b :
       all_gather_bytes(std::vector<char>(mine.begin(), mine.end()), num_ranks)) {
    out.emplace_back(b.begin(), b.end());
  }
  return out;
}

std::vector<RankLog> all_gather_logs(const RankLog& mine, int num_ranks) {
  Writer w;
  write_log(mine, w);
  std::vector<RankLog> logs;
  for (const std::vector<char>& bytes : all_gather_bytes(w.bytes(), num_ranks)) {
    Reader reader(bytes.data(), bytes.data() + bytes.size());
    logs.push_back(read_log(reader));
  }
  return logs;
}

void start_common_clock(const DeathWatch& watch, RunClock* clock) {
  MPI_Barrier(MPI_COMM_WORLD);
  int64_t start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
  MPI_Bcast(&start_ns, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  clock->start = watch.on_host_of_rank0()
                     ? std::chrono::steady_clock::time_point(std::chrono::nanoseconds(start_ns))
                     : std::chrono::steady_clock::now();
}

int producer_rank(const Schedule& schedule, const MessageKey& key) {
  const int producer_stage = key.kind == MessageKind::kActivation ? key.stage - 1 : key.stage + 1;
  return schedule.stage_rank[producer_stage];
}

Status check_world_size(const Schedule& schedule, const std::string& backend) {
  if (mpi_size() == schedule.num_ranks) return {};
  return Error{fmt::format(
      "{} backend: schedule {} has {} ranks but this job has {} processes; start it with "
      "mpirun -np {}",
      backend, schedule.name, schedule.num_ranks, mpi_size(), schedule.num_ranks)};
}

namespace {

// ---- Links ----------------------------------------------------------------

// Messages are told apart by their tag alone, one per (kind, microbatch,
// consuming stage, slice) in an iteration; an iteration's messages are all
// received before its barrier (asynchronous schedules have none, but a
// key's message of the next iteration depends on this one's having been
// received), and MPI keeps the order of messages with one tag between two
// ranks, so iterations need no tag of their own.
int64_t tag_of(const Schedule& schedule, const MessageKey& key) {
  const int64_t kind = key.kind == MessageKind::kActivation ? 0 : 1;
  return ((kind * schedule.num_stages + key.stage) * schedule.num_slices + key.slice) *
             schedule.num_microbatches +
         key.microbatch;
}

struct Header {
  int32_t producer = 0;
  int32_t src_rank = 0;
  Picos send_start = 0;
  int64_t rows = 0, cols = 0;
};

template <typename S>
class MpiTransport : public MpiRankTransport<kernels::Mat<S>> {
 public:
  MpiTransport(const Schedule& schedule, const RunClock* clock, DeathWatch* watch)
      : MpiRankTransport<kernels::Mat<S>>(watch), schedule_(schedule), clock_(clock) {}

  void send(int dst_rank, const MessageKey& key, Message<kernels::Mat<S>> m) override {
    this->complete_posts(false);
    Header h{m.producer, m.src_rank, m.send_start, m.data.rows(), m.data.cols()};
    const size_t data_bytes = static_cast<size_t>(m.data.size()) * sizeof(S);
    std::vector<char> bytes(sizeof(h) + data_bytes);
    std::memcpy(bytes.data(), &h, sizeof(h));
    std::memcpy(bytes.data() + sizeof(h), m.data.data(), data_bytes);
    this->post(std::move(bytes), dst_rank, static_cast<int>(tag_of(schedule_, key)));
  }

  Message<kernels::Mat<S>> receive(int /*rank*/, const MessageKey& key) override {
    // Exactly what the schedule expects: the producing stage's rank, this key.
    const int src = producer_rank(schedule_, key);
    const int tag = static_cast<int>(tag_of(schedule_, key));
    MPI_Status status;
    MPI_Probe(src, tag, MPI_COMM_WORLD, &status);
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    std::vector<char> bytes(count);
    MPI_Recv(bytes.data(), count, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    Message<kernels::Mat<S>> m;
    m.send_end = clock_->now();
    Header h;
    PPSIM_CHECK(bytes.size() >= sizeof(h));
    std::memcpy(&h, bytes.data(), sizeof(h));
    PPSIM_CHECK(bytes.size() == sizeof(h) + static_cast<size_t>(h.rows * h.cols) * sizeof(S));
    m.producer = h.producer;
    m.src_rank = h.src_rank;
    m.send_start = h.send_start;
    m.data.resize(h.rows, h.cols);
    std::memcpy(m.data.data(), bytes.data() + sizeof(h), bytes.size() - sizeof(h));
    return m;
  }

  void barrier(int /*rank*/) override {
    // Every send of the iteration is received before its barrier.
    this->complete_posts(true);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // Waits until every send was received (its buffer is then freed).
  void finish_sends() { this->complete_posts(true); }

 private:
  const Schedule& schedule_;
  const RunClock* clock_;
};

template <typename S>
Result<RunResult> run_rank(const RunPlan& plan) {
  const Schedule& schedule = *plan.schedule;
  const int rank = mpi_rank();
  DeathWatch watch;
  RunClock clock;
  MpiTransport<S> transport(schedule, &clock, &watch);
  RankExecutor<StageCompute<S>> executor(plan, rank, &transport, &clock,
                                         cpu_stage_factory<S>(plan));
  start_common_clock(watch, &clock);
  if (!executor.run()) return Error{transport.error()};
  transport.finish_sends();  // asynchronous schedules end with no barrier
  std::vector<RankLog> logs = all_gather_logs(executor.log(), schedule.num_ranks);
  watch.close();
  return assemble(plan, sizeof(S), std::move(logs));
}

}  // namespace

bool mpi_launched() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(variable) != nullptr) return true;
  }
  return false;
}

Status mpi_init(int* argc, char*** argv) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) return Error{"MPI_Init failed"};
  return {};
}

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

void mpi_abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  _exit(exit_code);  // MPI_Abort does not return; should it, this process still ends
}

int mpi_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int mpi_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

std::string mpi_broadcast_text(const std::string& text, int root) {
  if (text.size() > static_cast<size_t>(INT_MAX)) throw std::length_error("a text over 2 GiB");
  int size = static_cast<int>(text.size());
  MPI_Bcast(&size, 1, MPI_INT, root, MPI_COMM_WORLD);
  std::string out = mpi_rank() == root ? text : std::string(size, '\0');
  if (size > 0) MPI_Bcast(out.data(), size, MPI_CHAR, root, MPI_COMM_WORLD);
  return out;
}

std::string mpi_first_error(const std::string& error) {
  for (const std::string& e : all_gather_texts(error, mpi_size())) {
    if (!e.empty()) return e;
  }
  return "";
}

namespace {

Result<RunPlan> plan_mpi_run(const Schedule& schedule, const RuntimeModel& model,
                             const RunSettings& settings) {
  Result<RunPlan> plan = plan_run(schedule, model, settings);
  if (!plan) return plan.error();
  if (Status st = check_world_size(schedule, "mpi"); !st) return Error{st.message()};
  void* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  const int64_t tag_ub = found ? *static_cast<int*>(value) : 32767;  // the least MPI allows
  const int64_t tags = 2LL * schedule.num_stages * schedule.num_slices * schedule.num_microbatches;
  if (tags - 1 > tag_ub) {
    return Error{fmt::format(
        "mpi backend: {} stages x {} slices x {} microbatches need {} message tags; this MPI "
        "has {}",
        schedule.num_stages, schedule.num_slices, schedule.num_microbatches, tags, tag_ub + 1)};
  }
  return plan;
}

}  // namespace

Status check_mpi_run(const Schedule& schedule, const RuntimeModel& model,
                     const RunSettings& settings) {
  Result<RunPlan> plan = plan_mpi_run(schedule, model, settings);
  if (!plan) return plan.error();
  return {};
}

Result<RunResult> run_mpi(const Schedule& schedule, const RuntimeModel& model,
                          const RunSettings& settings) {
  Result<RunPlan> plan = plan_mpi_run(schedule, model, settings);
  if (!plan) return plan.error();
  return in_precision(*plan, fmt::format("rank {}, mpi runtime", mpi_rank()),
                      [&](auto s) { return run_rank<decltype(s)>(*plan); });
}

}  // namespace ppsim::runtime
