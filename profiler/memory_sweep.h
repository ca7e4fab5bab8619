// The sweep of memory-bound kernels `ppsim profile-memory` times on a GPU
// (gpu_memory_sweep.h), and the CSV it writes for `ppsim calibrate
// --memory` (sim/fit/memory_fit.h), which fits a hardware preset's
// hbm_efficiency and kernel_launch_us to it. Host code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ppsim {

// The buffers copied, in bytes: every power of two from 64 KiB, where a
// copy is mostly its fixed time, to 1 GiB, where it is mostly streaming.
std::vector<int64_t> memory_sweep_sizes();

// The CSV `ppsim calibrate --memory` reads: bytes, seconds, label, source,
// a row per size. A copy of a buffer of `sizes[i]` bytes reads and writes
// 2 x sizes[i] (the `bytes` column) in `seconds[i]`; `source` on every row.
// REQUIRES: as many seconds as sizes.
std::string memory_timings_csv(const std::vector<int64_t>& sizes,
                               const std::vector<double>& seconds, std::string_view source);

}  // namespace ppsim
