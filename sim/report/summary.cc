#include "sim/report/summary.h"

#include <fmt/format.h>

#include "sim/core/json.h"

namespace ppsim {

std::string format_duration(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.3f} ms", seconds * 1e3);
  return fmt::format("{:.3f} us", seconds * 1e6);
}

namespace {

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

}  // namespace

std::string format_summary_table(const Summary& s) {
  std::string out;
  const std::string context = s.context > 1 ? fmt::format(" cp={}", s.context) : std::string();
  const std::string expert = s.expert > 1 ? fmt::format(" ep={}", s.expert) : std::string();
  const std::string passes =
      s.flushes > 1 ? fmt::format(" in {} passes of {}", s.flushes, s.microbatches / s.flushes)
                    : std::string();
  out += fmt::format("schedule          {}  (p={} t={}{} d={}{} v={}, {} microbatches{})\n",
                     s.schedule, s.pipeline, s.tensor, context, s.data, expert, s.virtual_stages,
                     s.microbatches, passes);
  out += fmt::format(
      "iteration time    {}  (steady state{}; first iteration {})\n",
      format_duration(s.iteration_time_s),
      s.settled ? "" : fmt::format(", not settled after {} iterations", s.iterations_simulated),
      format_duration(s.first_iteration_s));
  out += fmt::format("bubble fraction   {:.2f} %\n", 100.0 * s.bubble_fraction);
  if (!s.slice_lengths.empty()) {
    out += fmt::format("token slices      {} ({})\n", s.slice_lengths.size(),
                       fmt::join(s.slice_lengths, " "));
  }
  out += fmt::format("throughput        {:.4g} samples/s", s.throughput.samples_per_s);
  if (s.throughput.tokens_per_s)
    out += fmt::format(", {:.4g} tokens/s", *s.throughput.tokens_per_s);
  out += '\n';
  if (s.throughput.tflops_per_gpu) {
    out += fmt::format("model TFLOP/s     {:.4g} per GPU", *s.throughput.tflops_per_gpu);
    if (s.throughput.mfu) out += fmt::format(" (MFU {:.1f} %)", 100.0 * *s.throughput.mfu);
    out += '\n';
  }
  if (!s.weights.empty()) {
    out += "\nasynchronous weights (per stage: versions kept, gradient delay in updates)\n";
    for (const StageWeights& w : s.weights) {
      out += fmt::format(
          "  stage {:>3}: {} version{}, staleness {}{}\n", w.stage, w.versions,
          w.versions == 1 ? "" : "s", w.staleness,
          w.extra_bytes > 0 ? fmt::format(", +{:.2f} GiB", gib(w.extra_bytes)) : std::string());
    }
  }
  out += fmt::format("\n{:>4}  {:>12}  {:>12}  {:>16}  {:>14}\n", "rank", "busy", "static GiB",
                     "peak act. GiB", "peak mem GiB");
  for (const DeviceSummary& d : s.devices) {
    out += fmt::format("{:>4}  {:>12}  {:>12.2f}  {:>16.2f}  {:>14.2f}", d.rank,
                       format_duration(d.busy_s), gib(d.static_bytes), gib(d.peak_activation_bytes),
                       gib(d.peak_memory_bytes));
    if (s.memory_capacity_bytes && d.peak_memory_bytes > *s.memory_capacity_bytes) {
      out += fmt::format("  over capacity ({:.2f} GiB)", *s.memory_capacity_bytes / (1ull << 30));
    }
    out += '\n';
  }
  for (const std::string& warning : s.warnings) out += fmt::format("\nwarning: {}\n", warning);
  return out;
}

std::string summary_to_json(const Summary& s) {
  std::string out;
  JsonWriter w(&out);
  write_summary(w, s);
  out += '\n';
  return out;
}

void write_summary(JsonWriter& w, const Summary& s) {
  w.begin_object();
  write_summary_fields(w, s);
  w.end_object();
}

void write_summary_fields(JsonWriter& w, const Summary& s) {
  w.field("schedule", s.schedule);
  w.key("model");
  if (s.model) {
    w.begin_object().field("parameters", s.model->parameters);
    w.field("active_parameters", s.model->active_parameters).end_object();
  } else {
    w.null();
  }
  w.key("parallel").begin_object();
  w.field("pipeline", s.pipeline).field("tensor", s.tensor).field("data", s.data);
  w.field("context", s.context).field("expert", s.expert);
  w.field("virtual_stages", s.virtual_stages).end_object();
  w.field("microbatches", s.microbatches);
  w.field("optimizer_step", s.optimizer_step);
  w.field("iteration_time_s", s.iteration_time_s);
  w.field("first_iteration_s", s.first_iteration_s);
  w.field("iterations_simulated", s.iterations_simulated);
  w.field("steady", s.settled);  // the JSON contract's name
  w.field("bubble_fraction", s.bubble_fraction);
  w.key("warnings").begin_array();
  for (const std::string& warning : s.warnings) w.value(warning);
  w.end_array();
  w.key("throughput").begin_object();
  w.field("samples_per_s", s.throughput.samples_per_s);
  w.field("tokens_per_s", s.throughput.tokens_per_s);
  w.field("tflops_per_gpu", s.throughput.tflops_per_gpu);
  w.field("mfu", s.throughput.mfu);
  w.end_object();
  w.field("memory_capacity_bytes", s.memory_capacity_bytes);
  if (!s.weights.empty()) {
    w.key("weights").begin_array();
    for (const StageWeights& sw : s.weights) {
      w.begin_object().field("stage", sw.stage).field("versions", sw.versions);
      w.field("staleness", sw.staleness).field("extra_bytes", sw.extra_bytes).end_object();
    }
    w.end_array();
  }
  if (!s.slice_lengths.empty()) {
    w.key("slice_lengths").begin_array();
    for (int l : s.slice_lengths) w.value(l);
    w.end_array();
  }
  w.key("devices").begin_array();
  for (const DeviceSummary& d : s.devices) {
    w.begin_object();
    w.field("rank", d.rank).field("busy_s", d.busy_s);
    w.field("static_bytes", d.static_bytes);
    w.field("peak_activation_bytes", d.peak_activation_bytes);
    w.field("weight_version_bytes", d.weight_version_bytes);
    w.field("working_bytes", d.working_bytes);
    w.field("peak_memory_bytes", d.peak_memory_bytes);
    w.end_object();
  }
  w.end_array();
}

}  // namespace ppsim
