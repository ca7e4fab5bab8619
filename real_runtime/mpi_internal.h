// What the backends of one process per rank share: the MPI backend
// (mpi_backend.cc) and the CUDA backend's processes over NCCL
// (nccl_backend.cc). Naming a rank that dies, the common start of the
// run's clock, the world-size check and gathering every rank's bytes and
// log. Internal to real_runtime/; the MPI types stay in these files.
// REQUIRES everywhere: mpi_init.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "real_runtime/rank_executor.h"

namespace ppsim::runtime {

struct RankSlot;
struct HostHeader;

// Each rank keeps what it is doing in a table shared by the ranks of its
// host (an MPI shared-memory window); when mpirun ends the job with
// SIGTERM after a rank died, the first survivor of the host to take it
// prints "ppsim: rank 1 died in 1F3 (iteration 1); the job was ended".
// Collective over MPI_COMM_WORLD to build; one per process at a time.
class DeathWatch {
 public:
  DeathWatch();
  // Without a collective call: a failed rank leaves its peers blocked.
  ~DeathWatch();
  DeathWatch(const DeathWatch&) = delete;
  DeathWatch& operator=(const DeathWatch&) = delete;

  void set(int iteration, const std::string& what);
  // This rank failed and says so itself: the survivors need not.
  void reported();
  bool on_host_of_rank0() const { return with_rank0_; }
  // This process's place among the ranks of its host.
  int host_rank() const { return self_; }
  int host_ranks() const { return ranks_; }
  // Collective, after a successful run.
  void close();

 private:
  void uninstall();

  MPI_Comm host_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  HostHeader* header_ = nullptr;
  RankSlot* slots_ = nullptr;
  int self_ = 0, ranks_ = 1;
  bool with_rank0_ = false;
};

// Bytes for gathering: plain values, vectors of them and text, in order.
class Writer {
 public:
  template <typename T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&v, sizeof(T));
  }
  template <typename T>
  void pods(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    pod(static_cast<int64_t>(v.size()));
    append(v.data(), v.size() * sizeof(T));
  }
  void text(const std::string& s) { pods(std::vector<char>(s.begin(), s.end())); }
  std::vector<char>& bytes() { return bytes_; }

 private:
  void append(const void* p, size_t n) {
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    if (n > 0) std::memcpy(bytes_.data() + at, p, n);
  }
  std::vector<char> bytes_;
};

class Reader {
 public:
  Reader(const char* begin, const char* end) : p_(begin), end_(end) {}
  template <typename T>
  T pod() {
    T v;
    PPSIM_CHECK(end_ - p_ >= static_cast<ptrdiff_t>(sizeof(T)));
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> pods() {
    const auto n = pod<int64_t>();
    PPSIM_CHECK(n >= 0 && end_ - p_ >= static_cast<ptrdiff_t>(n * sizeof(T)));
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), p_, n * sizeof(T));
    p_ += n * sizeof(T);
    return v;
  }
  std::string text() {
    std::vector<char> c = pods<char>();
    return std::string(c.begin(), c.end());
  }
  bool done() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

// What the transports of one process per rank share: sends posted with
// MPI_Isend, their buffers kept until MPI is done with them; the death
// watch's note of the current action; the rank's failure.
template <typename T>
class MpiRankTransport : public Transport<T> {
 public:
  explicit MpiRankTransport(DeathWatch* watch) : watch_(watch) {}

  void entering(int /*rank*/, int iteration, const std::string& what) override {
    watch_->set(iteration, what);
  }
  void abort_run(std::string message) override {
    if (error_.empty()) error_ = std::move(message);
    watch_->reported();
  }
  const std::string& error() const { return error_; }

 protected:
  // Sends `bytes` to `dst` under `tag` without waiting (MPI_Isend). Throws
  // std::length_error over 2 GiB.
  void post(std::vector<char> bytes, int dst, int tag) {
    if (bytes.size() > static_cast<size_t>(INT_MAX)) {
      throw std::length_error("a message over 2 GiB cannot go in one MPI message");
    }
    Pending& p = pending_.emplace_back();
    p.bytes = std::move(bytes);
    MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, dst, tag, MPI_COMM_WORLD,
              &p.request);
  }
  // Frees the buffers of the sends MPI has finished; with `all`, waits for
  // every send.
  void complete_posts(bool all) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      if (all) {
        MPI_Wait(&it->request, MPI_STATUS_IGNORE);
        done = 1;
      } else {
        MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      }
      it = done ? pending_.erase(it) : std::next(it);
    }
  }

 private:
  struct Pending {
    std::vector<char> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  DeathWatch* watch_;
  // Sends in flight (a list: MPI holds the buffers' addresses). After a
  // failure they are dropped with the transport while the job is being
  // aborted.
  std::list<Pending> pending_;
  std::string error_;
};

// A common start: after a barrier, rank 0's steady clock, broadcast (mpi.h,
// "Clocks"; a rank on another host than rank 0 starts its own clock).
void start_common_clock(const DeathWatch& watch, RunClock* clock);

// Every rank's bytes, by rank, on every rank. Throws std::length_error over
// 2 GiB in all.
std::vector<std::vector<char>> all_gather_bytes(const std::vector<char>& mine, int num_ranks);
// Every rank's text, by rank, on every rank.
std::vector<std::string> all_gather_texts(const std::string& mine, int num_ranks);
// Every rank's log, by rank, on every rank.
std::vector<RankLog> all_gather_logs(const RankLog& mine, int num_ranks);

// The rank of the stage that produces what `key` is for.
int producer_rank(const Schedule& schedule, const MessageKey& key);

// An Error unless the job has schedule.num_ranks processes: "<backend>
// backend: schedule 1f1b has 2 ranks but this job has 3 processes; start it
// with mpirun -np 2".
Status check_world_size(const Schedule& schedule, const std::string& backend);

}  // namespace ppsim::runtime
