// What the HTML report's files share for writing XML and SVG: escaping,
// numbers, colours, time axes, legends.
#include "sim/report/html_internal.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

namespace ppsim {
namespace html_internal {
namespace {

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

}  // namespace

std::string esc(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  escape_to(out, text);
  return out;
}

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

double nice_step(double rough) {
  if (!(rough > 0)) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  const double f = rough / magnitude;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * magnitude;
}

std::string rank_color(int rank) { return hue_color(rank * 137.508); }

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

}  // namespace html_internal
}  // namespace ppsim
