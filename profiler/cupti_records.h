// Reading CUPTI activity buffers into the project's plain structs
// (profiler/gpu_activity.h). Built only with the CUDA toolkit; no CUPTI type
// appears here, so callers need no CUDA headers. The records are parsed with
// CUPTI's own cuptiActivityGetNextRecord, which needs no device or driver,
// so the parsing is unit-tested on the host with synthetic buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "profiler/gpu_activity.h"
#include "schedules/status.h"

namespace ppsim::gpu {

// Appends every record of a completed activity buffer (`valid_size` bytes
// written by CUPTI) to *log: kernels, memcpys (including peer copies),
// memsets and external correlations are converted at once; other kinds are
// counted in log->other, records without usable timestamps in log->invalid.
// An Error when CUPTI reports the buffer malformed; the records read before
// it are kept.
Status read_activity_buffer(uint8_t* buffer, size_t valid_size, ActivityLog* log);

}  // namespace ppsim::gpu
