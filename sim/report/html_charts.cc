// The memory chart of one run, and the bar charts across runs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>

#include "sim/report/html_internal.h"

namespace ppsim {
namespace html_internal {
namespace {

// Points of one rank's memory curve. Many changes within one pixel column
// collapse to the column's first, highest, lowest and last level, so the
// peaks stay visible at any size.
class Curve {
 public:
  void add(double x, double y) {
    if (has_ && std::abs(x - x_) < 0.5) {
      hi_ = std::max(hi_, y);
      lo_ = std::min(lo_, y);
      last_ = y;
      return;
    }
    flush();
    has_ = true;
    x_ = x;
    first_ = hi_ = lo_ = last_ = y;
  }
  std::string finish() {
    flush();
    return std::move(points_);
  }

 private:
  void point(double y) {
    if (y == prev_y_ && x_ == prev_x_) return;
    fmt::format_to(std::back_inserter(points_), "{}{:.1f},{:.1f}", points_.empty() ? "" : " ", x_,
                   y);
    prev_x_ = x_;
    prev_y_ = y;
  }
  void flush() {
    if (!has_) return;
    // In SVG y grows downwards: the highest level is the smallest y.
    point(first_);
    point(lo_);
    point(hi_);
    point(last_);
    has_ = false;
  }
  std::string points_;
  bool has_ = false;
  double x_ = 0, first_ = 0, hi_ = 0, lo_ = 0, last_ = 0;
  double prev_x_ = -1, prev_y_ = -1;
};

// ---------------------------------------------------------------- bars

struct Bar {
  std::string name;
  double value = 0;
  std::string text;
  bool over = false;
};

// Horizontal bars, one per entry, so long names fit on the left.
void bar_chart(Out out, const char* cls, const std::string& label, const std::vector<Bar>& bars,
               std::optional<double> limit, const std::string& limit_text) {
  size_t longest = 4;
  for (const Bar& b : bars) longest = std::max(longest, b.name.size());
  const int label_width = std::clamp(static_cast<int>(longest) * 7 + 12, 80, 420);
  const int max_chars = (label_width - 12) / 7;
  const int value_width = 130;
  const int x0 = label_width;
  const int bar_width = kChartWidth - x0 - value_width;
  const int row = 22;
  const int top = 26;
  const int height = top + static_cast<int>(bars.size()) * row + 10;
  double v_max = 0;
  for (const Bar& b : bars) v_max = std::max(v_max, b.value);
  if (limit) v_max = std::max(v_max, *limit);
  if (!(v_max > 0)) v_max = 1;

  svg_open(out, cls, height, "", label);
  fmt::format_to(out, "<text class=\"ct\" x=\"0\" y=\"16\">{}</text>\n", esc(label));
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const int y = top + static_cast<int>(i) * row;
    std::string shown = b.name;
    if (static_cast<int>(shown.size()) > max_chars) shown = shown.substr(0, max_chars - 3) + "...";
    const double width = bar_width * std::max(b.value, 0.0) / v_max;
    fmt::format_to(out,
                   "<g class=\"bar\"><title>{}: {}</title>"
                   "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>"
                   "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"/>"
                   "<text x=\"{:.1f}\" y=\"{}\">{}</text></g>\n",
                   esc(b.name), esc(b.text), x0 - 8, y + 14, esc(shown), b.over ? "bv over" : "bv",
                   x0, y + 3, width, row - 6, x0 + width + 6, y + 14, esc(b.text));
  }
  if (limit) {
    const double x = x0 + bar_width * *limit / v_max;
    fmt::format_to(
        out,
        "<line class=\"cap\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>"
        "<text class=\"capl\" x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        x, top - 2, height - 6, top - 6, esc(limit_text));
  }
  fmt::format_to(out, "</svg>\n");
}

// What each rank holds throughout: its static bytes and (asynchronous
// schedules) its extra weight versions.
std::vector<int64_t> held_bytes(const Summary& s, const Timeline& t, int ranks) {
  std::vector<int64_t> level(ranks, 0);
  for (int r = 0; r < ranks; ++r) {
    if (static_cast<size_t>(r) < t.static_bytes.size()) level[r] = t.static_bytes[r];
    if (static_cast<size_t>(r) < s.devices.size()) level[r] += s.devices[r].weight_version_bytes;
  }
  return level;
}

// Only the drawn window's events: for a cut timeline, the events of the
// actions that start in it (an event is never before its action starts).
std::vector<MemoryEvent> window_events(const Timeline& t, const Window& w) {
  if (w.drawn == t.actions.size()) return memory_events(t);
  Timeline part;
  part.num_ranks = t.num_ranks;
  part.num_slices = t.num_slices;
  part.stage_memory = t.stage_memory;
  part.actions.reserve(w.drawn);
  for (const ActionRecord& a : t.actions) {
    if (a.start < w.end) part.actions.push_back(a);
  }
  return memory_events(part);
}

// Per rank, the highest level drawn.
std::vector<int64_t> drawn_peaks(std::vector<int64_t> running,
                                 const std::vector<MemoryEvent>& events, const Window& w) {
  std::vector<int64_t> peak = running;
  const int ranks = static_cast<int>(running.size());
  for (const MemoryEvent& e : events) {
    if (e.time > w.end) break;
    if (e.rank < 0 || e.rank >= ranks) continue;
    running[e.rank] += e.delta_bytes;
    peak[e.rank] = std::max(peak[e.rank], running[e.rank]);
  }
  return peak;
}

// The memory plot's frame: where it sits and its vertical scale.
struct MemoryPlot {
  int top;
  int height;
  double y_max;  // bytes at the top
  int bottom() const { return top + height; }
  double y(double bytes) const { return bottom() - height * bytes / y_max; }
};

// The grid lines and GiB labels of the vertical axis.
void memory_axis(Out out, const MemoryPlot& plot) {
  const double gib_step = nice_step(gib(plot.y_max) / 6);
  fmt::format_to(out, "<g class=\"axis\">\n");
  for (int i = 0;; ++i) {
    const double v = i * gib_step;
    if (v > gib(plot.y_max)) break;
    const double y = plot.y(v * (1ull << 30));
    fmt::format_to(out, "<line class=\"grid\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"/>\n",
                   kLeft - 4, y, kLeft + kPlotWidth, y);
    fmt::format_to(out, "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g} GiB</text>\n",
                   kLeft - 7, y + 4, v);
  }
  fmt::format_to(out, "</g>\n");
}

// Each rank's level over time, a step curve from what it holds throughout.
void memory_curves(Out out, const MemoryPlot& plot, const std::vector<MemoryEvent>& events,
                   const Window& w, const std::vector<int64_t>& held,
                   const std::vector<int64_t>& peak) {
  const TimeScale scale{w.end};
  const int ranks = static_cast<int>(held.size());
  std::vector<int64_t> level = held;
  std::vector<Curve> curves(ranks);
  for (int r = 0; r < ranks; ++r) curves[r].add(scale.x(0), plot.y(level[r]));
  for (const MemoryEvent& e : events) {
    if (e.time > w.end) break;
    if (e.rank < 0 || e.rank >= ranks) continue;
    const double x = scale.x(e.time);
    curves[e.rank].add(x, plot.y(level[e.rank]));
    level[e.rank] += e.delta_bytes;
    curves[e.rank].add(x, plot.y(level[e.rank]));
  }
  for (int r = 0; r < ranks; ++r) {
    curves[r].add(scale.x(w.end), plot.y(level[r]));
    // data-peak: the highest level drawn, in bytes, for programs to check
    // against the summary's peak.
    fmt::format_to(out,
                   "<polyline class=\"mem\" data-rank=\"{}\" data-peak=\"{}\" stroke=\"{}\" "
                   "points=\"{}\"><title>rank {}: {:.4g} GiB held throughout, {:.4g} GiB at "
                   "most</title></polyline>\n",
                   r, peak[r], rank_color(r), curves[r].finish(), r,
                   gib(static_cast<double>(held[r])), gib(static_cast<double>(peak[r])));
  }
}

}  // namespace

void memory_chart(Out out, const ReportEntry& entry, const Timeline& t, const Window& w) {
  const Summary& s = *entry.summary;
  const int p = std::max(t.num_ranks, 1);
  const std::vector<int64_t> held = held_bytes(s, t, p);
  const std::vector<MemoryEvent> events = window_events(t, w);
  const std::vector<int64_t> peak = drawn_peaks(held, events, w);
  // The scale: the highest level reached, and the capacity.
  double y_max = static_cast<double>(*std::max_element(peak.begin(), peak.end()));
  if (s.memory_capacity_bytes) y_max = std::max(y_max, *s.memory_capacity_bytes);
  y_max = y_max > 0 ? y_max * 1.05 : 1;

  std::vector<LegendItem> items;
  for (int r = 0; r < p; ++r) items.push_back({"", rank_color(r), fmt::format("rank {}", r), true});
  if (s.memory_capacity_bytes) {
    items.push_back({"", "#c0392b",
                     fmt::format("capacity {:.4g} GiB", gib(*s.memory_capacity_bytes)), true,
                     true});
  }
  std::string legend_svg;
  const int plot_top = legend(std::back_inserter(legend_svg), items, kLeft, 16) + 10;
  const MemoryPlot plot{plot_top, 240, y_max};

  svg_open(out, "memory", plot.bottom() + 40, fmt::format(" data-schedule=\"{}\"", esc(entry.name)),
           "Memory per rank of " + entry.name);
  fmt::format_to(out, "{}", legend_svg);
  fmt::format_to(out, "<rect class=\"plot\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n",
                 kLeft, plot.top, kPlotWidth, plot.height);
  memory_axis(out, plot);
  time_axis(out, TimeScale{w.end}, plot.top, plot.bottom());
  memory_curves(out, plot, events, w, held, peak);
  if (s.memory_capacity_bytes) {
    const double y = plot.y(*s.memory_capacity_bytes);
    fmt::format_to(
        out,
        "<line class=\"cap\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"><title>device "
        "capacity {:.4g} GiB</title></line>\n",
        kLeft, y, kLeft + kPlotWidth, y, gib(*s.memory_capacity_bytes));
  }
  fmt::format_to(out, "</svg>\n");
}

void bar_charts(Out out, const ReportInput& input) {
  std::vector<Bar> throughput;
  std::vector<Bar> memory;
  // One capacity line when every run has the same; none stands for several.
  // (-1 stands for none: GCC 12 wrongly warns on comparing optionals here.)
  double capacity = input.entries.front().summary->memory_capacity_bytes.value_or(-1);
  for (const ReportEntry& e : input.entries) {
    const Summary& s = *e.summary;
    throughput.push_back(
        {e.name, s.throughput.samples_per_s, rate_text(s.throughput.samples_per_s) + " samples/s"});
    const DeviceSummary* top = fullest_device(s);
    const double peak = top ? static_cast<double>(top->peak_memory_bytes) : 0;
    memory.push_back({e.name, peak,
                      top ? fmt::format("{:.2f} GiB (rank {})", gib(peak), top->rank) : "-",
                      over_capacity(s)});
    if (s.memory_capacity_bytes.value_or(-1) != capacity) capacity = -1;
  }
  bar_chart(out, "bars throughput", "Throughput (samples/s; higher is better)", throughput, {}, "");
  for (Bar& b : memory) b.value = gib(b.value);
  bar_chart(out, "bars memory", "Peak memory of the fullest rank (GiB; lower is better)", memory,
            capacity >= 0 ? std::optional<double>(gib(capacity)) : std::nullopt,
            capacity >= 0 ? fmt::format("capacity {:.4g} GiB", gib(capacity)) : "");
}

}  // namespace html_internal
}  // namespace ppsim
