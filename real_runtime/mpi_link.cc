// The MPI link (mpi.h): a blocking ping-pong between world ranks 0 and 1,
// what `ppsim profile` records as the link "mpi" when launched by mpirun.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>

#include "real_runtime/mpi.h"

namespace ppsim::runtime {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPingTag = 0;

// One round trip of `bytes` from rank 0 to rank 1 and back; on rank 0, its
// seconds, on rank 1, 0.
double round_trip(int rank, char* buffer, int bytes) {
  if (rank == 0) {
    const Clock::time_point start = Clock::now();
    MPI_Send(buffer, bytes, MPI_BYTE, 1, kPingTag, MPI_COMM_WORLD);
    MPI_Recv(buffer, bytes, MPI_BYTE, 1, kPingTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  MPI_Recv(buffer, bytes, MPI_BYTE, 0, kPingTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Send(buffer, bytes, MPI_BYTE, 0, kPingTag, MPI_COMM_WORLD);
  return 0;
}

}  // namespace

Result<std::vector<LinkSample>> mpi_ping_pong(const std::vector<int64_t>& sizes, int warmup,
                                              int repetitions) {
  // The checks use nothing but the arguments and the world size, so every
  // rank fails alike before any message.
  if (mpi_size() < 2) {
    return Error{fmt::format(
        "mpi link: a ping-pong needs 2 or more processes, this job has {}; start it with mpirun "
        "-np 2",
        mpi_size())};
  }
  if (repetitions < 1) {
    return Error{fmt::format("mpi link: repetitions must be >= 1, got {}", repetitions)};
  }
  for (int64_t size : sizes) {
    if (size < 0 || size > INT_MAX) {
      return Error{
          fmt::format("mpi link: a message size must be in [0, {}] bytes, got {}", INT_MAX, size)};
    }
  }
  const int rank = mpi_rank();
  std::vector<LinkSample> samples;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank < 2) {
    // At least one untimed round trip per size: the first touches fresh
    // pages and sets up the connection.
    const int untimed = std::max(warmup, 1);
    for (int64_t size : sizes) {
      std::vector<char> buffer(std::max<int64_t>(size, 1), 1);
      const int bytes = static_cast<int>(size);
      std::vector<double> times;
      for (int rep = -untimed; rep < repetitions; ++rep) {
        const double seconds = round_trip(rank, buffer.data(), bytes);
        if (rep >= 0) times.push_back(seconds);
      }
      if (rank == 0) {
        std::sort(times.begin(), times.end());
        samples.push_back({size, times[times.size() / 2] / 2});
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return samples;
}

Result<LinkFit> measure_mpi_link(const std::string& name, const std::vector<int64_t>& sizes,
                                 int warmup, int repetitions) {
  const bool root = mpi_rank() == 0;
  Result<LinkFit> link = Error{"mpi link: not measured"};
  // A fit can fail on noise (time not growing with size): measure again
  // before calling the link unmeasurable. Rank 0 tells the others whether
  // to.
  for (int attempt = 0; attempt < 3; ++attempt) {
    Result<std::vector<LinkSample>> samples = mpi_ping_pong(sizes, warmup, repetitions);
    if (!samples) return samples.error();
    int fitted = 1;
    if (root) {
      link = fit_link(name, std::move(*samples));
      fitted = link.ok() ? 1 : 0;
    }
    MPI_Bcast(&fitted, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!fitted) continue;
    if (root) return link;
    LinkFit named;
    named.name = name;
    return named;
  }
  if (root) return link;
  return Error{"mpi link: rank 0 could not fit the ping-pong's samples"};
}

}  // namespace ppsim::runtime
