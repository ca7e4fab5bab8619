#include "sim/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <optional>
#include <string_view>

#include "schedules/status.h"
#include "sim/report.h"

namespace ppsim {
namespace {

using Out = std::back_insert_iterator<std::string>;

// ---------------------------------------------------------------- text

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at text[i], or 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  // U+FFFE and U+FFFF are not XML characters either.
  if (cp == 0xFFFE || cp == 0xFFFF) return 0;
  return n;
}

// Appends `text` as XML character data or attribute content. Whatever XML
// cannot hold (control characters, bytes that are not UTF-8, as a config
// file in Latin-1 would have) becomes U+FFFD, so the file stays well-formed
// whatever a user's YAML contains.
void escape_to(std::string& out, std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&#39;";  // &apos; is XML but not HTML 4
          break;
        default:
          if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            out += kReplacement;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    const size_t n = utf8_length(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
}

std::string esc(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  escape_to(out, text);
  return out;
}

// The exact value as the JSON summary writes it (JsonWriter: the shortest
// text that reads back as the same double), so a program can compare the two.
std::string exact(double v) { return std::isfinite(v) ? fmt::format("{}", v) : std::string(); }

double gib(double bytes) { return bytes / (1ull << 30); }

// A rate for people: four significant digits, and from 10^4 on the whole
// number with its thousands grouped ("105,472"), never "1.055e+05".
std::string rate_text(double v) {
  if (!std::isfinite(v) || std::abs(v) < 1e4) return fmt::format("{:.4g}", v);
  const std::string digits = fmt::format("{:.0f}", std::abs(v));
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string ms_text(Picos t) { return fmt::format("{:.6g}", picos_to_seconds(t) * 1e3); }

// 1, 2 or 5 times a power of ten, near `rough`.
double nice_step(double rough) {
  if (!(rough > 0)) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  const double f = rough / magnitude;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * magnitude;
}

// An sRGB hex colour from a hue (degrees): distinct, equally dark lines.
std::string hue_color(double hue) {
  const double s = 0.65;
  const double l = 0.42;
  const double c = (1 - std::abs(2 * l - 1)) * s;
  const double h = std::fmod(hue, 360.0) / 60.0;
  const double x = c * (1 - std::abs(std::fmod(h, 2.0) - 1));
  double r = 0, g = 0, b = 0;
  if (h < 1) {
    r = c, g = x;
  } else if (h < 2) {
    r = x, g = c;
  } else if (h < 3) {
    g = c, b = x;
  } else if (h < 4) {
    g = x, b = c;
  } else if (h < 5) {
    r = x, b = c;
  } else {
    r = c, b = x;
  }
  const double m = l - c / 2;
  const auto byte = [&](double v) { return static_cast<int>(std::lround((v + m) * 255)); };
  return fmt::format("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b));
}

// Rank r's line colour: golden-angle hues, so neighbouring ranks differ.
std::string rank_color(int rank) { return hue_color(rank * 137.508); }

// ---------------------------------------------------------------- layout

constexpr int kChartWidth = 1280;
constexpr int kLeft = 84;  // room for "rank 63" and "120 GiB"
constexpr int kRight = 28;
constexpr int kPlotWidth = kChartWidth - kLeft - kRight;

// Seconds, milliseconds or microseconds, whichever reads best for a span.
struct TimeUnit {
  const char* name;
  double per_second;
};
TimeUnit unit_for(double span_s) {
  if (span_s >= 2) return {"s", 1};
  if (span_s >= 2e-3) return {"ms", 1e3};
  return {"us", 1e6};
}

// Time [0, end) onto x pixels [kLeft, kLeft + kPlotWidth).
struct TimeScale {
  Picos end = 1;
  double x(Picos t) const {
    return kLeft + kPlotWidth * static_cast<double>(t) / static_cast<double>(end);
  }
};

// Ticks, grid lines and labels of a time axis under a plot spanning
// [top, bottom) in y.
void time_axis(Out out, const TimeScale& scale, int top, int bottom) {
  const double span_s = picos_to_seconds(scale.end);
  const TimeUnit unit = unit_for(span_s);
  const double step = nice_step(span_s * unit.per_second / 10);
  fmt::format_to(out, "<g class=\"axis\">\n");
  fmt::format_to(out, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", kLeft, bottom,
                 kLeft + kPlotWidth, bottom);
  for (int i = 0;; ++i) {
    const double v = i * step;
    if (v > span_s * unit.per_second * (1 + 1e-9)) break;
    const double x = kLeft + kPlotWidth * v / (span_s * unit.per_second);
    fmt::format_to(out,
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>\n",
                   x, top, bottom + 4);
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", x,
                   bottom + 16, v);
  }
  fmt::format_to(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">time ({})</text>\n",
                 kLeft + kPlotWidth, bottom + 30, unit.name);
  fmt::format_to(out, "</g>\n");
}

struct LegendItem {
  std::string swatch_class;  // a CSS class giving the fill
  std::string fill;          // or an explicit fill when the class is empty
  std::string label;
  bool line = false;  // a line sample instead of a square
  bool dashed = false;
};

// A row of legend items from (x, y), wrapping at the chart's width; returns
// the y below it.
int legend(Out out, const std::vector<LegendItem>& items, int x0, int y) {
  int x = x0;
  fmt::format_to(out, "<g class=\"legend\">\n");
  for (const LegendItem& item : items) {
    const int width = 24 + static_cast<int>(item.label.size()) * 7;
    if (x + width > kChartWidth - kRight && x > x0) {
      x = x0;
      y += 18;
    }
    if (item.line) {
      fmt::format_to(out, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"{}/>\n", x,
                     y - 4, x + 14, y - 4, item.fill.empty() ? "#444" : item.fill,
                     item.dashed ? " class=\"cap\"" : " stroke-width=\"2\"");
    } else if (!item.swatch_class.empty()) {
      fmt::format_to(out, "<rect x=\"{}\" y=\"{}\" width=\"11\" height=\"11\" class=\"{}\"/>\n", x,
                     y - 10, item.swatch_class);
    } else {
      fmt::format_to(out, "<rect x=\"{}\" y=\"{}\" width=\"11\" height=\"11\" fill=\"{}\"/>\n", x,
                     y - 10, item.fill);
    }
    fmt::format_to(out, "<text x=\"{}\" y=\"{}\">{}</text>\n", x + 16, y, esc(item.label));
    x += width;
  }
  fmt::format_to(out, "</g>\n");
  return y + 12;
}

void svg_open(Out out, const char* cls, int height, const std::string& extra_attrs,
              const std::string& label) {
  fmt::format_to(out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{}\"{} width=\"{}\" "
                 "height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n",
                 cls, extra_attrs, kChartWidth, height, kChartWidth, height, esc(label));
}

// ---------------------------------------------------------------- what to draw

// The part of a timeline a report draws: all of it, or for a big one the
// time up to the end of the first iteration, cut shorter still if that holds
// more than kMaxGanttActions actions.
struct Window {
  Picos end = 1;
  size_t drawn = 0;  // actions that start before `end`
  bool first_iteration_only = false;
  bool cut = false;  // shorter than the first iteration
};

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

// Transfers narrower than this many pixels would be invisible; leaving
// them out halves a big chart's file.
constexpr double kMinTransferPixels = 0.1;

bool visible(const TransferRecord& x, const Window& w) {
  return x.start < w.end &&
         static_cast<double>(x.end - x.start) * kPlotWidth >= kMinTransferPixels * w.end;
}

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

// ---------------------------------------------------------------- Gantt

void gantt(Out out, const ReportEntry& entry, const Timeline& t, const Window& w) {
  const int p = std::max(t.num_ranks, 1);
  const int row = std::clamp(480 / p, 6, 26);
  const int lane = row >= 14 ? 3 : 1;  // transfers, under the rank's compute
  const int gap = row >= 14 ? 2 : 1;
  const int bar = row - lane - gap;
  const TimeScale scale{w.end};

  // The legend names only what the chart holds.
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

  // The legend's height depends on wrapping: lay it out first.
  std::string legend_svg;
  const int rows_top = legend(std::back_inserter(legend_svg), items, kLeft, 16) + 14;
  const int rows_bottom = rows_top + p * row;
  const int height = rows_bottom + 40;

  svg_open(out, "gantt", height, fmt::format(" data-schedule=\"{}\"", esc(entry.name)),
           "Gantt chart of " + entry.name);
  fmt::format_to(out, "{}", legend_svg);
  fmt::format_to(out, "<g class=\"rows\">\n");
  for (int r = 0; r < p; ++r) {
    fmt::format_to(out,
                   "<rect class=\"idle\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">"
                   "<title>rank {}: idle where no block is drawn</title></rect>\n",
                   kLeft, rows_top + r * row, kPlotWidth, row - gap, r);
  }
  fmt::format_to(out, "</g>\n");
  time_axis(out, scale, rows_top - 4, rows_bottom);

  // Every rank's rectangles go to its own group; one pass over the records.
  std::vector<std::string> body(p);
  const auto rect = [&](int rank, Picos start, Picos end, int y, int h, std::string_view cls) {
    const double x0 = scale.x(start);
    double width = scale.x(std::min(end, w.end)) - x0;
    if (width > 2) width -= 0.5;  // a hairline between neighbours of one kind
    fmt::format_to(std::back_inserter(body[rank]),
                   "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" class=\"{}\">", x0,
                   y, width, h, cls);
    return width;
  };
  for (const ActionRecord& a : t.actions) {
    if (a.start >= w.end || a.rank < 0 || a.rank >= p) continue;
    const std::string name = to_string(a.action);
    const char cls[2] = {action_kind_letter(a.action.kind), '\0'};
    const int y = rows_top + a.rank * row;
    const double width = rect(a.rank, a.start, a.end, y, bar, cls);
    std::string& b = body[a.rank];
    fmt::format_to(std::back_inserter(b),
                   "<title>{} rank {} iteration {}: {} to {} ms</title></rect>\n", name, a.rank,
                   a.iteration, ms_text(a.start), ms_text(a.end));
    // A label where it fits: the action's name, else its microbatch.
    if (bar >= 11) {
      const std::string mb = std::to_string(a.action.microbatch);
      const std::string& label = width >= 6.2 * name.size() + 4 ? name
                                 : width >= 6.2 * mb.size() + 3 ? mb
                                                                : name;
      if (width >= 6.2 * label.size() + 3) {
        fmt::format_to(std::back_inserter(b),
                       "<text class=\"l\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       scale.x(a.start) + width / 2, y + bar / 2 + 3, label);
      }
    }
  }
  for (const EpilogueRecord& e : t.epilogue) {
    // A phase that takes no time (no data parallelism, say) draws nothing.
    if (e.start >= w.end || e.end <= e.start || e.rank < 0 || e.rank >= p) continue;
    rect(e.rank, e.start, e.end, rows_top + e.rank * row, bar, epilogue_class(e.kind));
    fmt::format_to(std::back_inserter(body[e.rank]),
                   "<title>{} rank {} iteration {}: {} to {} ms</title></rect>\n",
                   to_string(e.kind), e.rank, e.iteration, ms_text(e.start), ms_text(e.end));
  }
  for (const TransferRecord& x : t.transfers) {
    if (!visible(x, w)) continue;
    const int src = t.src_rank(x);
    if (src < 0 || src >= p) continue;
    const ActionRecord& producer = t.actions[x.producer];
    const bool activation = producer.action.kind == ActionKind::kForward;
    rect(src, x.start, x.end, rows_top + src * row + bar, lane, activation ? "xa" : "xg");
    fmt::format_to(
        std::back_inserter(body[src]),
        "<title>{} of {} rank {} to {} (for {}): {} to {} ms, {:.4g} MiB</title></rect>\n",
        activation ? "activation" : "gradient", to_string(producer.action), src, t.dst_rank(x),
        to_string(t.actions[x.consumer].action), ms_text(x.start), ms_text(x.end),
        static_cast<double>(t.bytes(x)) / (1 << 20));
  }
  // Labels on every rank while they fit, else on every k-th.
  const int label_every = row >= 10 ? 1 : (10 + row - 1) / row;
  for (int r = 0; r < p; ++r) {
    fmt::format_to(out, "<g class=\"rank\" data-rank=\"{}\">\n", r);
    if (r % label_every == 0) {
      fmt::format_to(out,
                     "<text class=\"rl\" x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {}</text>\n",
                     kLeft - 6, rows_top + r * row + bar / 2 + 4, r);
    }
    fmt::format_to(out, "{}</g>\n", body[r]);
  }
  // Where iterations end: the steady-state period is the distance between
  // the last two lines.
  double last_label = -1e9;
  for (size_t k = 0; k < t.iteration_end.size(); ++k) {
    const Picos end = t.iteration_end[k];
    if (end > w.end) continue;
    const double x = scale.x(end);
    fmt::format_to(out,
                   "<line class=\"iter\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>\n",
                   x, rows_top - 6, rows_bottom);
    if (x - last_label > 110) {
      fmt::format_to(out,
                     "<text class=\"iterl\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"end\">end of "
                     "iteration {}</text>\n",
                     x - 3, rows_top - 6, k + 1);
      last_label = x;
    }
  }
  fmt::format_to(out, "</svg>\n");
}

// ---------------------------------------------------------------- memory

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

void memory_chart(Out out, const ReportEntry& entry, const Timeline& t, const Window& w) {
  const Summary& s = *entry.summary;
  const int p = std::max(t.num_ranks, 1);
  std::vector<int64_t> level(p, 0);
  for (int r = 0; r < p; ++r) {
    if (static_cast<size_t>(r) < t.static_bytes.size()) level[r] = t.static_bytes[r];
    // Extra weight versions (asynchronous schedules) are held throughout.
    if (static_cast<size_t>(r) < s.devices.size()) level[r] += s.devices[r].weight_version_bytes;
  }
  // Only the drawn window's events: for a cut timeline, the events of the
  // actions that start in it (an event is never before its action starts).
  std::vector<MemoryEvent> events;
  if (w.drawn == t.actions.size()) {
    events = memory_events(t);
  } else {
    Timeline part;
    part.num_ranks = t.num_ranks;
    part.num_slices = t.num_slices;
    part.stage_memory = t.stage_memory;
    part.actions.reserve(w.drawn);
    for (const ActionRecord& a : t.actions) {
      if (a.start < w.end) part.actions.push_back(a);
    }
    events = memory_events(part);
  }
  // The scale: the highest level reached, and the capacity.
  std::vector<int64_t> running = level;
  std::vector<int64_t> peak = level;  // per rank, the highest level drawn
  for (const MemoryEvent& e : events) {
    if (e.time > w.end) break;
    if (e.rank < 0 || e.rank >= p) continue;
    running[e.rank] += e.delta_bytes;
    peak[e.rank] = std::max(peak[e.rank], running[e.rank]);
  }
  const int64_t top = *std::max_element(peak.begin(), peak.end());
  double y_max = static_cast<double>(top);
  if (s.memory_capacity_bytes) y_max = std::max(y_max, *s.memory_capacity_bytes);
  y_max = y_max > 0 ? y_max * 1.05 : 1;
  const double gib_step = nice_step(gib(y_max) / 6);

  std::vector<LegendItem> items;
  for (int r = 0; r < p; ++r) items.push_back({"", rank_color(r), fmt::format("rank {}", r), true});
  if (s.memory_capacity_bytes) {
    items.push_back({"", "#c0392b",
                     fmt::format("capacity {:.4g} GiB", gib(*s.memory_capacity_bytes)), true,
                     true});
  }
  std::string legend_svg;
  const int plot_top = legend(std::back_inserter(legend_svg), items, kLeft, 16) + 10;
  const int plot_height = 240;
  const int plot_bottom = plot_top + plot_height;
  const auto y_of = [&](double bytes) { return plot_bottom - plot_height * bytes / y_max; };

  svg_open(out, "memory", plot_bottom + 40, fmt::format(" data-schedule=\"{}\"", esc(entry.name)),
           "Memory per rank of " + entry.name);
  fmt::format_to(out, "{}", legend_svg);
  fmt::format_to(out, "<rect class=\"plot\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n",
                 kLeft, plot_top, kPlotWidth, plot_height);
  fmt::format_to(out, "<g class=\"axis\">\n");
  for (int i = 0;; ++i) {
    const double v = i * gib_step;
    if (v > gib(y_max)) break;
    const double y = y_of(v * (1ull << 30));
    fmt::format_to(out, "<line class=\"grid\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"/>\n",
                   kLeft - 4, y, kLeft + kPlotWidth, y);
    fmt::format_to(out, "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g} GiB</text>\n",
                   kLeft - 7, y + 4, v);
  }
  fmt::format_to(out, "</g>\n");
  const TimeScale scale{w.end};
  time_axis(out, scale, plot_top, plot_bottom);

  const std::vector<int64_t> held = level;
  std::vector<Curve> curves(p);
  for (int r = 0; r < p; ++r) curves[r].add(scale.x(0), y_of(level[r]));
  for (const MemoryEvent& e : events) {
    if (e.time > w.end) break;
    if (e.rank < 0 || e.rank >= p) continue;
    const double x = scale.x(e.time);
    curves[e.rank].add(x, y_of(level[e.rank]));
    level[e.rank] += e.delta_bytes;
    curves[e.rank].add(x, y_of(level[e.rank]));
  }
  for (int r = 0; r < p; ++r) {
    curves[r].add(scale.x(w.end), y_of(level[r]));
    // data-peak: the highest level drawn, in bytes, for programs to check
    // against the summary's peak.
    fmt::format_to(out,
                   "<polyline class=\"mem\" data-rank=\"{}\" data-peak=\"{}\" stroke=\"{}\" "
                   "points=\"{}\"><title>rank {}: {:.4g} GiB held throughout, {:.4g} GiB at "
                   "most</title></polyline>\n",
                   r, peak[r], rank_color(r), curves[r].finish(), r,
                   gib(static_cast<double>(held[r])), gib(static_cast<double>(peak[r])));
  }
  if (s.memory_capacity_bytes) {
    const double y = y_of(*s.memory_capacity_bytes);
    fmt::format_to(
        out,
        "<line class=\"cap\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"><title>device "
        "capacity {:.4g} GiB</title></line>\n",
        kLeft, y, kLeft + kPlotWidth, y, gib(*s.memory_capacity_bytes));
  }
  fmt::format_to(out, "</svg>\n");
}

// ---------------------------------------------------------------- summary

const DeviceSummary* fullest(const Summary& s) {
  if (s.devices.empty()) return nullptr;
  return &*std::max_element(s.devices.begin(), s.devices.end(), [](const auto& a, const auto& b) {
    return a.peak_memory_bytes < b.peak_memory_bytes;
  });
}

bool over_capacity(const Summary& s) {
  const DeviceSummary* top = fullest(s);
  return top && s.memory_capacity_bytes && top->peak_memory_bytes > *s.memory_capacity_bytes;
}

// What the table says besides the entry's own note.
std::string full_note(const ReportEntry& e) {
  std::string note = e.note;
  const auto add = [&](const std::string& text) { note += (note.empty() ? "" : "; ") + text; };
  if (!e.summary->steady) {
    add(fmt::format("iteration time not settled after {} iterations",
                    e.summary->iterations_simulated));
  }
  if (over_capacity(*e.summary) && e.note.find("capacity") == std::string::npos &&
      e.note.find("exceeds") == std::string::npos) {
    add(fmt::format("over the device's {:.2f} GiB", gib(*e.summary->memory_capacity_bytes)));
  }
  return note;
}

struct Columns {
  bool tokens = false;
  bool mfu = false;
};

Columns columns_of(const ReportInput& input) {
  Columns c;
  for (const ReportEntry& e : input.entries) {
    c.tokens |= e.summary->throughput.tokens_per_s.has_value();
    c.mfu |= e.summary->throughput.mfu.has_value();
  }
  return c;
}

void number_cell(Out out, const char* field, const std::string& value, const std::string& text,
                 const char* extra_class = "", const std::string& extra_attrs = "") {
  fmt::format_to(out, "<td class=\"num{}\" data-field=\"{}\" data-value=\"{}\"{}>{}</td>",
                 extra_class, field, value, extra_attrs, text);
}

void summary_table(Out out, const ReportInput& input) {
  const Columns c = columns_of(input);
  double best = 0;
  for (const ReportEntry& e : input.entries) {
    best = std::max(best, e.summary->throughput.samples_per_s);
  }
  fmt::format_to(out,
                 "<table class=\"summary\">\n<thead><tr><th>schedule</th>"
                 "<th title=\"steady state: between the ends of the last two iterations\">"
                 "iteration time</th><th>samples/s</th>{}{}<th>bubble</th>"
                 "<th>peak memory per rank (max)</th><th>note</th></tr></thead>\n<tbody>\n",
                 c.tokens ? "<th>tokens/s</th>" : "", c.mfu ? "<th>MFU</th>" : "");
  for (const ReportEntry& e : input.entries) {
    const Summary& s = *e.summary;
    const Throughput& th = s.throughput;
    fmt::format_to(out, "<tr data-entry=\"{}\"><td class=\"name\">{}</td>", esc(e.name),
                   esc(e.name));
    number_cell(out, "iteration_time_s", exact(s.iteration_time_s),
                esc(format_duration(s.iteration_time_s)));
    number_cell(out, "samples_per_s", exact(th.samples_per_s), rate_text(th.samples_per_s),
                best > 0 && th.samples_per_s == best && input.entries.size() > 1 ? " best" : "");
    if (c.tokens) {
      if (th.tokens_per_s) {
        number_cell(out, "tokens_per_s", exact(*th.tokens_per_s), rate_text(*th.tokens_per_s));
      } else {
        fmt::format_to(out, "<td class=\"num\">-</td>");
      }
    }
    if (c.mfu) {
      if (th.mfu) {
        number_cell(out, "mfu", exact(*th.mfu), fmt::format("{:.1f} %", 100 * *th.mfu));
      } else {
        fmt::format_to(out, "<td class=\"num\">-</td>");
      }
    }
    number_cell(out, "bubble_fraction", exact(s.bubble_fraction),
                fmt::format("{:.2f} %", 100 * s.bubble_fraction));
    if (const DeviceSummary* top = fullest(s)) {
      number_cell(out, "peak_memory_bytes", std::to_string(top->peak_memory_bytes),
                  fmt::format("{:.2f} GiB (rank {})", gib(top->peak_memory_bytes), top->rank),
                  over_capacity(s) ? " over" : "", fmt::format(" data-rank=\"{}\"", top->rank));
    } else {
      fmt::format_to(out, "<td class=\"num\">-</td>");
    }
    fmt::format_to(out, "<td class=\"note\">{}</td></tr>\n", esc(full_note(e)));
  }
  fmt::format_to(out, "</tbody>\n</table>\n");
}

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
    const DeviceSummary* top = fullest(s);
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

// ---------------------------------------------------------------- page

constexpr std::string_view kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  margin: 24px; color: #1d2430; background: #fff; }
h1 { font-size: 1.6em; margin: 0 0 4px 0; }
h2 { font-size: 1.25em; margin: 28px 0 8px 0; border-bottom: 1px solid #d5dae1; padding-bottom: 4px; }
h3 { font-size: 1.05em; margin: 22px 0 4px 0; }
p.meta, p.caption { color: #5b6472; margin: 4px 0 8px 0; font-size: 0.92em; }
table.summary { border-collapse: collapse; font-size: 0.92em; }
table.summary th, table.summary td { padding: 4px 10px; border-bottom: 1px solid #e3e6ea; text-align: left; }
table.summary th { background: #f3f5f8; font-weight: 600; }
table.summary td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.summary td.name { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
table.summary td.best { font-weight: 700; }
table.summary td.over { color: #b0281a; font-weight: 600; }
table.summary td.note { color: #5b6472; max-width: 420px; }
table.summary tbody tr:nth-child(even) { background: #fafbfc; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; padding: 12px; overflow: auto; font-size: 0.88em;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
svg { display: block; max-width: 100%; height: auto; margin: 6px 0 10px 0; }
svg text { font-family: inherit; font-size: 11px; fill: #333; }
svg .axis line { stroke: #555; stroke-width: 1; }
svg .axis line.grid { stroke: #000; stroke-opacity: 0.10; }
svg .axis text { fill: #555; }
svg .legend text { fill: #333; }
svg text.ct { font-size: 13px; font-weight: 600; }
svg text.l { font-size: 9px; fill: #fff; pointer-events: none; }
svg text.rl { fill: #333; }
svg text.iterl { font-size: 10px; fill: #6b4f9e; }
svg line.iter { stroke: #6b4f9e; stroke-width: 1; stroke-dasharray: 4 3; }
svg rect.idle { fill: #eceff3; }
svg rect.plot { fill: #fafbfc; stroke: #d5dae1; }
svg .F { fill: #3b6fb6; }
svg .B { fill: #e07b39; }
svg .I { fill: #c8453b; }
svg .W { fill: #3a923a; }
svg .S { fill: #8a5fb0; }
svg .gs { fill: #8c6d4f; }
svg .ps { fill: #c9a27e; }
svg .os { fill: #4a3a2c; }
svg .xa { fill: #1b3a6b; fill-opacity: 0.75; }
svg .xg { fill: #9a3f12; fill-opacity: 0.75; }
svg polyline.mem { fill: none; stroke-width: 1.6; }
svg .cap { stroke: #c0392b; stroke-width: 1.5; stroke-dasharray: 6 4; }
svg text.capl { fill: #c0392b; font-size: 10px; }
svg rect.bv { fill: #3b6fb6; }
svg rect.bv.over { fill: #c0392b; }
svg.bars rect.bv { rx: 2; }
)";

}  // namespace

std::string html_report(const ReportInput& input) {
  for (const ReportEntry& e : input.entries) PPSIM_CHECK(e.summary != nullptr);
  std::string html;
  size_t actions = 0;
  for (const ReportEntry& e : input.entries) {
    if (e.timeline) actions += std::min(e.timeline->actions.size(), size_t{kMaxGanttActions});
  }
  html.reserve(16384 + input.config_text.size() * 2 + actions * 220);
  Out out = std::back_inserter(html);
  const std::string title = input.title.empty() ? std::string("ppsim report") : input.title;
  fmt::format_to(
      out,
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n"
      "<head>\n<meta charset=\"utf-8\"/>\n"
      "<meta name=\"generator\" content=\"ppsim\"/>\n<title>{}</title>\n<style>{}</style>\n"
      "</head>\n<body>\n<h1>{}</h1>\n",
      esc(title), kStyle, esc(title));
  fmt::format_to(out,
                 "<p class=\"meta\">{} run{}. Iteration time is the steady state (between the ends "
                 "of the last two simulated iterations); bubble = 1 - compute busy time / "
                 "(ranks &#215; iteration time); peak memory counts static, extra weight versions "
                 "and activations.</p>\n",
                 input.entries.size(), input.entries.size() == 1 ? "" : "s");

  fmt::format_to(out, "<h2>Summary</h2>\n");
  summary_table(out, input);

  if (!input.entries.empty()) {
    fmt::format_to(out, "<h2>Across runs</h2>\n");
    bar_charts(out, input);
  }

  bool any_timeline = false;
  for (const ReportEntry& e : input.entries) any_timeline |= e.timeline != nullptr;
  if (any_timeline) fmt::format_to(out, "<h2>Timelines</h2>\n");
  for (const ReportEntry& e : input.entries) {
    if (!e.timeline) continue;
    const Timeline& t = *e.timeline;
    const Window w = window_of(t);
    fmt::format_to(out, "<section class=\"run\">\n<h3>{}</h3>\n", esc(e.name));
    std::string caption =
        fmt::format("{} ranks, {} actions over {} iteration{}, {} in all; iteration time {}.",
                    t.num_ranks, t.actions.size(), t.iterations, t.iterations == 1 ? "" : "s",
                    format_duration(picos_to_seconds(t.makespan)),
                    format_duration(e.summary->iteration_time_s));
    if (w.first_iteration_only) {
      caption += fmt::format(
          " Only {} is drawn ({} of {} actions): above {} actions the report keeps its charts "
          "small.",
          w.cut ? fmt::format("the first {} of the first iteration",
                              format_duration(picos_to_seconds(w.end)))
                : std::string("the first iteration"),
          w.drawn, t.actions.size(), kMaxGanttActions);
    }
    const auto hidden = std::count_if(t.transfers.begin(), t.transfers.end(), [&](const auto& x) {
      return x.start < w.end && x.end > x.start && !visible(x, w);
    });
    if (hidden > 0) {
      caption += fmt::format(
          " {} transfers too short to see at this scale are left out (the Chrome trace has "
          "them).",
          hidden);
    }
    caption += " Hover a block for its action and times.";
    fmt::format_to(out, "<p class=\"caption\">{}</p>\n", esc(caption));
    gantt(out, e, t, w);
    fmt::format_to(out,
                   "<p class=\"caption\">Memory per rank: static bytes{} plus activations.</p>\n",
                   e.summary->weights.empty() ? "" : " and extra weight versions");
    memory_chart(out, e, t, w);
    fmt::format_to(out, "</section>\n");
  }

  fmt::format_to(out, "<h2>Config</h2>\n<pre class=\"config\">{}</pre>\n</body>\n</html>\n",
                 esc(input.config_text));
  return html;
}

namespace {

// A Markdown table cell: pipes escaped, one line.
std::string md_cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string markdown_report(const ReportInput& input) {
  for (const ReportEntry& e : input.entries) PPSIM_CHECK(e.summary != nullptr);
  const Columns c = columns_of(input);
  std::string md;
  Out out = std::back_inserter(md);
  if (!input.title.empty()) fmt::format_to(out, "# {}\n\n", md_cell(input.title));
  fmt::format_to(out,
                 "| schedule | iteration time | samples/s |{}{} bubble | peak memory | note |\n",
                 c.tokens ? " tokens/s |" : "", c.mfu ? " MFU |" : "");
  fmt::format_to(out, "| --- | ---: | ---: |{}{} ---: | ---: | --- |\n", c.tokens ? " ---: |" : "",
                 c.mfu ? " ---: |" : "");
  for (const ReportEntry& e : input.entries) {
    const Summary& s = *e.summary;
    const Throughput& th = s.throughput;
    fmt::format_to(out, "| {} | {} | {} |", md_cell(e.name), format_duration(s.iteration_time_s),
                   rate_text(th.samples_per_s));
    if (c.tokens) {
      fmt::format_to(out, " {} |", th.tokens_per_s ? rate_text(*th.tokens_per_s) : "-");
    }
    if (c.mfu) fmt::format_to(out, " {} |", th.mfu ? fmt::format("{:.1f} %", 100 * *th.mfu) : "-");
    const DeviceSummary* top = fullest(s);
    fmt::format_to(
        out, " {:.2f} % | {} | {} |\n", 100 * s.bubble_fraction,
        top ? fmt::format("{:.2f} GiB (rank {})", gib(top->peak_memory_bytes), top->rank) : "-",
        md_cell(full_note(e)));
  }
  return md;
}

}  // namespace ppsim
