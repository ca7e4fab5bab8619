#include "sim/report/ops_report.h"

#include <fmt/format.h>

#include "sim/report/evidence_note.h"
#include "sim/report/summary.h"

namespace ppsim {
namespace {

const char* kind_name(const Op& op) {
  switch (op.kind) {
    case OpKind::kGemm:
      return "GEMM";
    case OpKind::kMemory:
      return "memory";
    case OpKind::kFlashAttention:
      return "attention";
    case OpKind::kCollective:
      return "collective";
    case OpKind::kRingExchange:
      return "ring";
  }
  return "?";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all-reduce";
    case CollectiveKind::kReduceScatter:
      return "reduce-scatter";
    case CollectiveKind::kAllGather:
      return "all-gather";
    case CollectiveKind::kAllToAll:
      return "all-to-all";
  }
  return "?";
}

// What sizes the kernel: a GEMM's [batch x] M x N x K, a collective's kind,
// the random numbers a dropout kernel draws.
std::string shape_of(const Op& op) {
  switch (op.kind) {
    case OpKind::kGemm:
      return op.batch > 1 ? fmt::format("{:g} x {:g} x {:g} x {:g}", op.batch, op.m, op.n, op.k)
                          : fmt::format("{:g} x {:g} x {:g}", op.m, op.n, op.k);
    case OpKind::kFlashAttention:
      return fmt::format("{}, {:g} keys a query", op.backward ? "backward" : "forward",
                         op.keys_per_query);
    case OpKind::kCollective:
      return fmt::format("{}{}{}", collective_name(op.collective),
                         op.overlaps_gemm ? ", overlapped" : "",
                         op.weight_partner >= 0 ? ", beside W" : "");
    case OpKind::kRingExchange:
      return op.beside_attention
                 ? fmt::format("{:g} steps, overlapped", op.steps)
                 : fmt::format("{} of {:g}", collective_name(op.collective), op.steps + 1);
    case OpKind::kMemory:
      // A dropout mask's: at hardware.dropout_rng_gsamples_per_s they may
      // take longer than the bytes.
      if (op.random_draws > 0) return fmt::format("{:.3g} random draws", op.random_draws);
      break;
  }
  return "";
}

// A GEMM's tile and waves, and the waves' worth of work they hold when
// quantization rounds it up: "256x128, 2 waves for 1.48".
std::string tiles_of(const PricedOp& p) {
  const GemmTiling& t = p.tiling;
  if (t.tile_m <= 0) return "";
  const std::string tile = fmt::format("{:g}x{:g}", t.tile_m, t.tile_n);
  if (t.waves <= 0) return tile;
  if (t.work >= t.waves * (1 - 1e-9)) return fmt::format("{}, {:g} waves", tile, t.waves);
  return fmt::format("{}, {:g} waves for {:.2f}", tile, t.waves, t.work);
}

std::string gflop_of(const Op& op) {
  return op.flops > 0 ? fmt::format("{:.2f}", op.flops / 1e9) : std::string();
}

std::string megabytes_of(const Op& op) {
  const double bytes = op.bytes + op.result_bytes;
  return bytes > 0 ? fmt::format("{:.1f}", bytes / 1e6) : std::string();
}

std::string format_phase(const PricedPhase& phase) {
  double alone = 0;
  for (const PricedOp& p : phase.ops) alone += p.seconds;
  const double device = phase.seconds - phase.host_wait_seconds;
  std::string out = fmt::format("  {}: {}", phase.name, format_duration(phase.seconds));
  if (alone > device * (1 + 1e-9)) {
    out += fmt::format(" ({} of operations, {} hidden by overlap)", format_duration(alone),
                       format_duration(alone - device));
  }
  if (phase.host_wait_seconds > device * 1e-9) {
    out += fmt::format(" (the GPU waits {} for the host's launches)",
                       format_duration(phase.host_wait_seconds));
  }
  out += '\n';
  if (phase.ops.empty()) return out;
  out +=
      fmt::format("    {:<36} {:<10} {:<30} {:<28} {:>9} {:>9} {:>10} {:>7}\n", "operation", "kind",
                  "shape (M x N x K)", "tiles (waves for work)", "GFLOP", "MB", "time", "share");
  for (const PricedOp& p : phase.ops) {
    const double share = phase.seconds > 0 ? 100.0 * p.seconds / phase.seconds : 0;
    const std::string name =
        p.op.host_waits ? fmt::format("{} (host waits)", p.op.name) : std::string(p.op.name);
    out += fmt::format("    {:<36} {:<10} {:<30} {:<28} {:>9} {:>9} {:>10} {:>6.1f}%\n", name,
                       kind_name(p.op), shape_of(p.op), tiles_of(p), gflop_of(p.op),
                       megabytes_of(p.op), format_duration(p.seconds), share);
  }
  return out;
}

// ZeRO 2's and 3's collectives of the piece's weights, when it has any.
std::string format_sharded_traffic(const PricedPiece& piece) {
  if (piece.gather_seconds > 0) {
    return fmt::format(
        "  ZeRO 3, per microbatch: weights all-gathered in {} (before the forward and again "
        "before the input gradient), gradients reduce-scattered in {} (after the weight "
        "gradient), each beside the compute; the stage times add what outlasts it\n",
        format_duration(piece.gather_seconds), format_duration(piece.scatter_seconds));
  }
  if (piece.scatter_seconds > 0) {
    return fmt::format(
        "  ZeRO 2, per microbatch: gradients reduce-scattered in {} after the weight gradient, "
        "beside the compute; the stage times add what outlasts it\n",
        format_duration(piece.scatter_seconds));
  }
  return {};
}

}  // namespace

std::string host_wait_note(const std::vector<PricedPiece>& pieces) {
  const PricedPiece* worst = nullptr;
  double worst_share = 0;
  double worst_wait = 0;
  double worst_total = 0;
  for (const PricedPiece& piece : pieces) {
    double wait = 0;
    double total = 0;
    for (const PricedPhase& phase : piece.phases) {
      wait += phase.host_wait_seconds;
      total += phase.seconds;
    }
    if (total <= 0 || wait / total <= worst_share) continue;
    worst = &piece;
    worst_share = wait / total;
    worst_wait = wait;
    worst_total = total;
  }
  if (worst == nullptr || worst_share < kHostWaitNoteShare) return "";
  return fmt::format(
      "The GPU waits for the host's launches {} of each {}'s {} a microbatch ({:.0f} %; "
      "simulate --ops shows where): CUDA graphs (training.cuda_graph_scope) or a larger "
      "micro-batch would hide them.\n",
      format_duration(worst_wait), worst->name, format_duration(worst_total), 100 * worst_share);
}

std::string host_wait_note(const Config& config) {
  if (!config.model || !config.hardware || !analytic_layer_times(config)) return "";
  Result<std::vector<PricedPiece>> pieces = priced_pieces(config);
  return pieces ? host_wait_note(*pieces) : "";
}

std::string format_op_table(const std::string& heading, const std::vector<PricedPiece>& pieces) {
  std::string out = heading + '\n';
  for (const PricedPiece& piece : pieces) {
    out += fmt::format("\n{}\n", piece.name);
    for (const PricedPhase& phase : piece.phases) out += format_phase(phase);
    if (piece.backward_overlap_seconds > 0) {
      out += fmt::format(
          "  input and weight gradient as one backward: {} less (collectives marked \"beside "
          "W\" run beside their weight-gradient GEMMs)\n",
          format_duration(piece.backward_overlap_seconds));
    }
    out += format_sharded_traffic(piece);
  }
  return out;
}

}  // namespace ppsim
