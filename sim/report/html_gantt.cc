// The Gantt chart of one run: a row per rank, its compute, epilogue and
// transfers, and where iterations end.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <string_view>

#include "sim/report/html_internal.h"

namespace ppsim {
namespace html_internal {
namespace {

std::string ms_text(Picos t) { return fmt::format("{:.6g}", picos_to_seconds(t) * 1e3); }

// Transfers narrower than this many pixels would be invisible; leaving
// them out halves a big chart's file.
constexpr double kMinTransferPixels = 0.1;

constexpr std::array<const char*, kNumActionKinds> kKindLabel = {
    "F forward", "B backward", "I input gradient", "W weight gradient", "S optimizer step"};

const char* epilogue_class(EpilogueKind kind) {
  switch (kind) {
    case EpilogueKind::kGradSync:
      return "gs";
    case EpilogueKind::kPipelineSync:
      return "ps";
    case EpilogueKind::kOptimizerStep:
      return "os";
  }
  return "os";
}

}  // namespace

Window window_of(const Timeline& t) {
  Window w;
  w.end = std::max<Picos>(t.makespan, 1);
  w.drawn = t.actions.size();
  if (t.actions.size() <= static_cast<size_t>(kMaxGanttActions)) return w;
  w.first_iteration_only = true;
  if (t.iterations > 1 && !t.iteration_end.empty()) w.end = std::max<Picos>(t.iteration_end[0], 1);
  // With post-validation a rank may start the next iteration before the
  // last rank ends this one: draw what happened in the time, whatever the
  // iteration, so that no rank looks idle when it was not.
  std::vector<Picos> starts;
  starts.reserve(t.actions.size());
  for (const ActionRecord& a : t.actions) {
    if (a.start < w.end) starts.push_back(a.start);
  }
  if (starts.size() > static_cast<size_t>(kMaxGanttActions)) {
    std::nth_element(starts.begin(), starts.begin() + kMaxGanttActions, starts.end());
    w.end = std::max<Picos>(starts[kMaxGanttActions], 1);
    w.cut = true;
    w.drawn = std::count_if(starts.begin(), starts.end(), [&](Picos s) { return s < w.end; });
  } else {
    w.drawn = starts.size();
  }
  return w;
}

bool visible(const TransferRecord& x, const Window& w) {
  return x.start < w.end &&
         static_cast<double>(x.end - x.start) * kPlotWidth >= kMinTransferPixels * w.end;
}

namespace {

// The chart's rows: a bar per rank for its compute, a lane under it for the
// transfers it sends, a gap between ranks.
struct Rows {
  int ranks;
  int row;   // height of a rank's row
  int lane;  // transfers, under the rank's compute
  int gap;
  int bar;  // the compute's height
  int top = 0;
  int y(int rank) const { return top + rank * row; }
  int bottom() const { return top + ranks * row; }
};

Rows rows_for(int num_ranks) {
  Rows rows;
  rows.ranks = std::max(num_ranks, 1);
  rows.row = std::clamp(480 / rows.ranks, 6, 26);
  rows.lane = rows.row >= 14 ? 3 : 1;
  rows.gap = rows.row >= 14 ? 2 : 1;
  rows.bar = rows.row - rows.lane - rows.gap;
  return rows;
}

// The legend names only what the chart holds.
std::vector<LegendItem> legend_items(const Timeline& t, const Window& w) {
  std::array<bool, kNumActionKinds> kinds{};
  for (const ActionRecord& a : t.actions) {
    if (a.start < w.end) kinds[static_cast<int>(a.action.kind)] = true;
  }
  std::array<bool, 3> epilogue_kinds{};
  for (const EpilogueRecord& e : t.epilogue) {
    if (e.start < w.end && e.end > e.start) epilogue_kinds[static_cast<int>(e.kind)] = true;
  }
  std::vector<LegendItem> items;
  for (int k = 0; k < kNumActionKinds; ++k) {
    if (kinds[k]) {
      items.push_back(
          {std::string(1, action_kind_letter(static_cast<ActionKind>(k))), "", kKindLabel[k]});
    }
  }
  for (int k = 0; k < 3; ++k) {
    const auto kind = static_cast<EpilogueKind>(k);
    if (epilogue_kinds[k]) items.push_back({epilogue_class(kind), "", to_string(kind)});
  }
  bool any_transfer = false;
  for (const TransferRecord& x : t.transfers) any_transfer |= visible(x, w);
  if (any_transfer) {
    items.push_back({"xa", "", "activation transfer (sender's row)"});
    items.push_back({"xg", "", "gradient transfer (sender's row)"});
  }
  items.push_back({"idle", "", "idle"});
  return items;
}

// Every rank's rectangles, each rank's in a group of its own, in one pass
// over the records.
class RankBodies {
 public:
  RankBodies(const Timeline& t, const Window& w, const Rows& rows)
      : t_(t), w_(w), rows_(rows), scale_{w.end}, body_(rows.ranks) {}

  void draw_actions() {
    for (size_t k = 0; k < t_.actions.size(); ++k) {
      const ActionRecord& a = t_.actions[k];
      if (a.start >= w_.end || a.rank < 0 || a.rank >= rows_.ranks) continue;
      draw_action(k, a);
    }
  }

  void draw_epilogue() {
    for (const EpilogueRecord& e : t_.epilogue) {
      // A phase that takes no time (no data parallelism, say) draws nothing.
      if (e.start >= w_.end || e.end <= e.start || e.rank < 0 || e.rank >= rows_.ranks) continue;
      rect(e.rank, e.start, e.end, rows_.y(e.rank), rows_.bar, epilogue_class(e.kind));
      fmt::format_to(std::back_inserter(body_[e.rank]),
                     "<title>{} rank {} iteration {}: {} to {} ms</title></rect>\n",
                     to_string(e.kind), e.rank, e.iteration, ms_text(e.start), ms_text(e.end));
    }
  }

  void draw_transfers() {
    for (const TransferRecord& x : t_.transfers) {
      if (!visible(x, w_)) continue;
      const int src = t_.src_rank(x);
      if (src < 0 || src >= rows_.ranks) continue;
      const ActionRecord& producer = t_.actions[x.producer];
      const bool activation = producer.action.kind == ActionKind::kForward;
      rect(src, x.start, x.end, rows_.y(src) + rows_.bar, rows_.lane, activation ? "xa" : "xg");
      fmt::format_to(
          std::back_inserter(body_[src]),
          "<title>{} of {} rank {} to {} (for {}): {} to {} ms, {:.4g} MiB</title></rect>\n",
          activation ? "activation" : "gradient", to_string(producer.action), src, t_.dst_rank(x),
          to_string(t_.actions[x.consumer].action), ms_text(x.start), ms_text(x.end),
          static_cast<double>(t_.bytes(x)) / (1 << 20));
    }
  }

  // The groups, with rank labels on every rank while they fit, else on every
  // k-th.
  void write(Out out) const {
    const int label_every = rows_.row >= 10 ? 1 : (10 + rows_.row - 1) / rows_.row;
    for (int r = 0; r < rows_.ranks; ++r) {
      fmt::format_to(out, "<g class=\"rank\" data-rank=\"{}\">\n", r);
      if (r % label_every == 0) {
        fmt::format_to(out,
                       "<text class=\"rl\" x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {}</text>\n",
                       kLeft - 6, rows_.y(r) + rows_.bar / 2 + 4, r);
      }
      fmt::format_to(out, "{}</g>\n", body_[r]);
    }
  }

 private:
  // Opens the rectangle (its title follows); returns its drawn width.
  double rect(int rank, Picos start, Picos end, int y, int h, std::string_view cls) {
    const double x0 = scale_.x(start);
    double width = scale_.x(std::min(end, w_.end)) - x0;
    if (width > 2) width -= 0.5;  // a hairline between neighbours of one kind
    fmt::format_to(std::back_inserter(body_[rank]),
                   "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" class=\"{}\">", x0,
                   y, width, h, cls);
    return width;
  }

  void draw_action(size_t k, const ActionRecord& a) {
    const std::string name = to_string(a.action);
    const int64_t partner = t_.overlap_partner(k);
    const std::string overlapped =
        partner < 0 ? ""
                    : fmt::format(", overlapped with {}", to_string(t_.actions[partner].action));
    const char cls[2] = {action_kind_letter(a.action.kind), '\0'};
    const int y = rows_.y(a.rank);
    const double width = rect(a.rank, a.start, a.end, y, rows_.bar, cls);
    std::string& b = body_[a.rank];
    fmt::format_to(std::back_inserter(b),
                   "<title>{} rank {} iteration {}{}: {} to {} ms</title></rect>\n", name, a.rank,
                   a.iteration, overlapped, ms_text(a.start), ms_text(a.end));
    // A label where it fits: the action's name, else its microbatch.
    if (rows_.bar < 11) return;
    const std::string mb = std::to_string(a.action.microbatch);
    const std::string& label = width >= 6.2 * name.size() + 4 ? name
                               : width >= 6.2 * mb.size() + 3 ? mb
                                                              : name;
    if (width >= 6.2 * label.size() + 3) {
      fmt::format_to(std::back_inserter(b),
                     "<text class=\"l\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     scale_.x(a.start) + width / 2, y + rows_.bar / 2 + 3, label);
    }
  }

  const Timeline& t_;
  const Window& w_;
  const Rows& rows_;
  const TimeScale scale_;
  std::vector<std::string> body_;
};

// Where iterations end: the steady-state period is the distance between the
// last two lines.
void iteration_ends(Out out, const Timeline& t, const Window& w, const Rows& rows) {
  const TimeScale scale{w.end};
  double last_label = -1e9;
  for (size_t k = 0; k < t.iteration_end.size(); ++k) {
    const Picos end = t.iteration_end[k];
    if (end > w.end) continue;
    const double x = scale.x(end);
    fmt::format_to(out,
                   "<line class=\"iter\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>\n",
                   x, rows.top - 6, rows.bottom());
    if (x - last_label > 110) {
      fmt::format_to(out,
                     "<text class=\"iterl\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"end\">end of "
                     "iteration {}</text>\n",
                     x - 3, rows.top - 6, k + 1);
      last_label = x;
    }
  }
}

}  // namespace

void gantt(Out out, const ReportEntry& entry, const Timeline& t, const Window& w) {
  Rows rows = rows_for(t.num_ranks);
  // The legend's height depends on wrapping: lay it out first.
  std::string legend_svg;
  rows.top = legend(std::back_inserter(legend_svg), legend_items(t, w), kLeft, 16) + 14;
  const int height = rows.bottom() + 40;

  svg_open(out, "gantt", height, fmt::format(" data-schedule=\"{}\"", esc(entry.name)),
           "Gantt chart of " + entry.name);
  fmt::format_to(out, "{}", legend_svg);
  fmt::format_to(out, "<g class=\"rows\">\n");
  for (int r = 0; r < rows.ranks; ++r) {
    fmt::format_to(out,
                   "<rect class=\"idle\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">"
                   "<title>rank {}: idle where no block is drawn</title></rect>\n",
                   kLeft, rows.y(r), kPlotWidth, rows.row - rows.gap, r);
  }
  fmt::format_to(out, "</g>\n");
  time_axis(out, TimeScale{w.end}, rows.top - 4, rows.bottom());
  RankBodies bodies(t, w, rows);
  bodies.draw_actions();
  bodies.draw_epilogue();
  bodies.draw_transfers();
  bodies.write(out);
  iteration_ends(out, t, w, rows);
  fmt::format_to(out, "</svg>\n");
}

}  // namespace html_internal
}  // namespace ppsim
