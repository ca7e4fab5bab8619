// What a GPU tracer records, in the project's own plain structs. The CUPTI
// tracer (profiler/cupti_tracer.h) copies each activity record into these the
// moment it reads it, so no CUPTI record version leaks past it; the
// cudaEvent fallback fills the same spans. Host code only: built and tested
// with or without the CUDA toolkit.
//
// Attribution: the runtime brackets each schedule action's GPU work with an
// external correlation id (the action's record index + 1; CUPTI's
// cuptiActivityPushExternalCorrelationId). CUPTI then writes one
// ExternalCorrelation record per API call made inside the bracket, tying the
// call's correlation id to the external id; the kernels and copies that call
// launched carry the same correlation id. `action_spans` joins them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppsim::gpu {

enum class CopyKind {
  kHostToDevice,
  kDeviceToHost,
  kDeviceToDevice,  // within one device
  kPeer,            // between two devices
  kHostToHost,
  kOther,
};

const char* to_string(CopyKind kind);

// Timestamps are nanoseconds on the tracer's clock (CUPTI's, or the events'
// offsets from the first event).
struct KernelActivity {
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t device = 0, stream = 0, correlation = 0;
};

struct CopyActivity {
  CopyKind kind = CopyKind::kOther;
  uint64_t bytes = 0;
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t device = 0;       // the device that ran the copy (the source of a peer copy)
  uint32_t peer_device = 0;  // the other device of a peer copy; `device` otherwise
  uint32_t stream = 0, correlation = 0;
};

struct SetActivity {
  uint64_t bytes = 0;
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t device = 0, stream = 0, correlation = 0;
};

struct ExternalCorrelation {
  uint32_t correlation = 0;
  uint64_t external_id = 0;
};

// Everything one trace collected, and what it could not keep.
struct ActivityLog {
  std::vector<KernelActivity> kernels;
  std::vector<CopyActivity> copies;
  std::vector<SetActivity> sets;
  std::vector<ExternalCorrelation> correlations;
  uint64_t dropped = 0;  // records the tracer reported lost (a full buffer)
  uint64_t invalid = 0;  // records with a zero or reversed timestamp, not kept
  uint64_t other = 0;    // records of kinds nobody asked for, skipped

  // The add_ functions keep a record only if its timestamps are usable (CUPTI
  // writes 0 where it could not take one); otherwise they count it invalid.
  void add_kernel(KernelActivity k);
  void add_copy(CopyActivity c);
  void add_set(SetActivity s);
  void add_correlation(ExternalCorrelation c) { correlations.push_back(c); }
  // Appends `other`'s records and counts.
  void merge(ActivityLog other);
};

// The GPU work of one external id (one schedule action): from the first
// start to the last end of the kernels, copies and sets attributed to it.
struct ActionSpan {
  uint64_t external_id = 0;
  uint64_t start_ns = 0, end_ns = 0;
  int kernels = 0, copies = 0, sets = 0;
};

struct Attribution {
  std::vector<ActionSpan> spans;  // by external id, ascending
  int64_t unattributed = 0;       // records whose correlation id has no external id
  // A correlation id tied to two external ids (brackets that overlap on one
  // thread): its records go to the first, and it is counted here.
  int64_t ambiguous = 0;
};

Attribution action_spans(const ActivityLog& log);

// One line for people: "312 kernels, 24 copies, 0 sets; 0 dropped, 1 invalid".
std::string summary(const ActivityLog& log);

}  // namespace ppsim::gpu
