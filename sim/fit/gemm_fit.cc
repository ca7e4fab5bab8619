#include "sim/fit/gemm_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>

#include "sim/config/config.h"
#include "sim/cost/layer_ops.h"
#include "sim/cost/op_time.h"
#include "sim/fit/csv_records.h"
#include "sim/fit/fit_report.h"

namespace ppsim {
namespace {

constexpr int kNumParameters = static_cast<int>(std::size(kGemmFitParameters));
// The grid: this many points across each fitted parameter's range, then
// across two of that grid's steps either side of its best point, and so on
// kLevels times: each level's step a fifth of the last, the last 1/12,500
// of the range (finer than any microbenchmark's noise).
constexpr int kGridPoints = 21;
constexpr int kLevels = 5;
constexpr double kLargestDimension = 2147483648.0;  // 2^31

// The targets of read_row are in this order.
constexpr CsvColumn kColumns[] = {
    {"m", true},      {"n", true},      {"k", true},       {"seconds", true},
    {"batch", false}, {"label", false}, {"source", false},
};

Result<GemmTiming> read_row(const CsvRecord& record, const std::vector<int>& columns,
                            const std::string& path) {
  Result<GemmTiming> row =
      read_csv_record<GemmTiming>(record, columns, path, kColumns, [](GemmTiming& r, int column) {
        const CsvNumberRange whole{kLargestDimension};
        const CsvTarget targets[] = {csv_number(&r.m, whole),     csv_number(&r.n, whole),
                                     csv_number(&r.k, whole),     csv_number(&r.seconds),
                                     csv_number(&r.batch, whole), csv_text(&r.label),
                                     csv_text(&r.source)};
        return targets[column];
      });
  if (row.ok() && row->label.empty()) {
    row->label = row->batch > 1
                     ? fmt::format("{:g} x {:g} x {:g} x {:g}", row->batch, row->m, row->n, row->k)
                     : fmt::format("{:g} x {:g} x {:g}", row->m, row->n, row->k);
  }
  return row;
}

// The model's times for every row, at `hardware`.
std::vector<double> model_times(const HardwareSpec& hardware, DType dtype,
                                const GemmTimings& timings) {
  std::vector<double> times;
  times.reserve(timings.rows.size());
  for (const GemmTiming& row : timings.rows)
    times.push_back(gemm_model_seconds(hardware, dtype, row));
  return times;
}

std::vector<double> errors_of(const std::vector<double>& times, const GemmTimings& timings) {
  std::vector<double> errors;
  for (size_t i = 0; i < times.size(); ++i) {
    errors.push_back(relative_error(times[i], timings.rows[i].seconds));
  }
  return errors;
}

double sum_of_squares(const std::vector<double>& errors) {
  double sum = 0;
  for (double e : errors) sum += e * e;
  return sum;
}

// One level of the grid: every combination of kGridPoints values of each
// fitted parameter within [low, high]; the best point's values.
struct Box {
  std::vector<double> low, high;  // per fitted parameter
};

std::vector<double> best_in(const Box& box, const std::vector<int>& fitted, HardwareSpec hardware,
                            DType dtype, const GemmTimings& timings) {
  const int dims = static_cast<int>(fitted.size());
  std::vector<int> index(dims, 0);
  std::vector<double> best(dims), values(dims);
  double best_cost = std::numeric_limits<double>::infinity();
  for (;;) {
    for (int d = 0; d < dims; ++d) {
      values[d] = box.low[d] + (box.high[d] - box.low[d]) * index[d] / (kGridPoints - 1);
      hardware.*kGemmFitParameters[fitted[d]].member = values[d];
    }
    const double cost = sum_of_squares(errors_of(model_times(hardware, dtype, timings), timings));
    if (cost < best_cost) {
      best_cost = cost;
      best = values;
    }
    int d = 0;
    while (d < dims && ++index[d] == kGridPoints) index[d++] = 0;
    if (d == dims) return best;
  }
}

// The fitted parameters' values: the grid over their ranges, refined
// kLevels times around its best point; `base` holds every other field.
std::vector<double> grid_fit(const std::vector<int>& fitted, const HardwareSpec& base, DType dtype,
                             const GemmTimings& timings) {
  Box box;
  for (int j : fitted) {
    box.low.push_back(kGemmFitParameters[j].lower);
    box.high.push_back(kGemmFitParameters[j].upper);
  }
  std::vector<double> best;
  for (int level = 0; level < kLevels && !fitted.empty(); ++level) {
    best = best_in(box, fitted, base, dtype, timings);
    for (size_t d = 0; d < fitted.size(); ++d) {
      const GemmFitParameter& p = kGemmFitParameters[fitted[d]];
      const double step = (box.high[d] - box.low[d]) / (kGridPoints - 1);
      box.low[d] = std::max(p.lower, best[d] - 2 * step);
      box.high[d] = std::min(p.upper, best[d] + 2 * step);
    }
  }
  return best;
}

HardwareSpec with_values(HardwareSpec hardware, const std::vector<int>& fitted,
                         const std::vector<double>& values) {
  for (size_t d = 0; d < fitted.size(); ++d) {
    hardware.*kGemmFitParameters[fitted[d]].member = values[d];
  }
  return hardware;
}

// The largest relative change of a row's time when parameter `j` moves by
// a tenth of its range either way from `at` (inward at a bound), the
// parameters `others` fitted again each time: with none, whether the rows
// see `j` at all; with the other fitted ones, whether they can make up for
// it (as for two parameters and one shape).
double largest_change(int j, const std::vector<int>& others, const HardwareSpec& at, DType dtype,
                      const GemmTimings& timings) {
  const GemmFitParameter& p = kGemmFitParameters[j];
  const std::vector<double> base = model_times(at, dtype, timings);
  double largest = 0;
  for (const double sign : {-1.0, 1.0}) {
    HardwareSpec moved = at;
    moved.*p.member = std::clamp(at.*p.member + sign * 0.1 * (p.upper - p.lower), p.lower, p.upper);
    const HardwareSpec refit = with_values(moved, others, grid_fit(others, moved, dtype, timings));
    const std::vector<double> times = model_times(refit, dtype, timings);
    for (size_t i = 0; i < times.size(); ++i) {
      largest = std::max(largest, std::abs(times[i] / base[i] - 1));
    }
  }
  return largest;
}

// Whether the timings determine fitted parameter `j` beside the others.
bool determined(int j, const std::vector<int>& fitted, const HardwareSpec& fit, DType dtype,
                const GemmTimings& timings) {
  std::vector<int> others;
  for (int f : fitted) {
    if (f != j) others.push_back(f);
  }
  return largest_change(j, others, fit, dtype, timings) > kGemmMinRowChange;
}

}  // namespace

Result<GemmTimings> parse_gemm_timings(std::string_view text, const std::string& path) {
  return read_csv_table<GemmTimings, GemmTiming>(text, path, kColumns, "m,n,k,seconds,label",
                                                 "timings", read_row);
}

Result<GemmTimings> load_gemm_timings(const std::string& path) {
  return load_csv_file(path, parse_gemm_timings);
}

Result<HardwareSpec> load_hardware_preset(const std::string& preset) {
  std::string quoted;
  for (char c : preset) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  const std::string yaml = fmt::format(
      "model: {{layers: 1, hidden: 64, heads: 1, seq_len: 8, vocab: 8}}\n"
      "hardware: {{preset: \"{}\", gpus_per_node: 1}}\n"
      "training: {{global_batch: 1}}\n",
      quoted);
  Result<Config> config = parse_config(yaml, "--hardware");
  if (!config.ok()) {
    // The line and column are the made-up config's: the message after them.
    const std::string& message = config.error().message;
    const size_t key = message.find("hardware.preset");
    return Error{"--hardware " + preset + ": " +
                 (key == std::string::npos ? message : message.substr(key))};
  }
  return *config->hardware;
}

double gemm_model_seconds(const HardwareSpec& hardware, DType dtype, const GemmTiming& row) {
  const double bytes = dtype_bytes(dtype);
  const OpTimer timer(hardware, dtype, 1);
  return timer.seconds(gemm_op("gemm", row.batch, row.m, row.n, row.k, bytes, bytes), GroupLinks{});
}

Result<GemmFitResult> fit_gemm_timings(const HardwareSpec& preset, DType dtype,
                                       const GemmTimings& timings) {
  if (timings.rows.empty()) return Error{fmt::format("{}: no timings to fit", timings.path)};
  GemmFitResult result;
  result.hardware = preset;
  std::vector<int> fitted;
  for (int j = 0; j < kNumParameters; ++j) {
    GemmParameterResult p;
    p.parameter = &kGemmFitParameters[j];
    p.preset = preset.*p.parameter->member;
    p.value = p.preset;
    p.largest_row_change = largest_change(j, {}, preset, dtype, timings);
    p.fitted = p.largest_row_change > kGemmMinRowChange;
    if (p.fitted) fitted.push_back(j);
    result.parameters.push_back(p);
  }
  // Fits the parameters the rows see; while one of them is not determined
  // beside the others, the last listed such goes back to the preset's value.
  for (;;) {
    result.hardware = with_values(preset, fitted, grid_fit(fitted, preset, dtype, timings));
    const auto loose = std::find_if(fitted.rbegin(), fitted.rend(), [&](int j) {
      return !determined(j, fitted, result.hardware, dtype, timings);
    });
    if (loose == fitted.rend()) break;
    result.parameters[*loose].fitted = false;
    result.parameters[*loose].beside_others = true;
    fitted.erase(std::next(loose).base());
  }
  for (int j : fitted) result.parameters[j].value = result.hardware.*kGemmFitParameters[j].member;
  result.before = errors_of(model_times(preset, dtype, timings), timings);
  result.after = errors_of(model_times(result.hardware, dtype, timings), timings);
  result.before_summary = summarize_errors(result.before);
  result.after_summary = summarize_errors(result.after);
  return result;
}

std::string format_gemm_fit(const GemmTimings& timings, const GemmFitResult& fit,
                            std::string_view preset, std::string_view date) {
  std::string out = fmt::format("{:<28} {:>10} {:>10}  status\n", "parameter", "preset", "fitted");
  for (const GemmParameterResult& p : fit.parameters) {
    std::string status = "fitted";
    if (p.beside_others) {
      status = "not fitted: the other parameters make up for a tenth of its range";
    } else if (!p.fitted) {
      status = fmt::format(
          "not fitted: a tenth of its range moves no row by more than {:.1f}% ({:.2f}% at most)",
          100 * kGemmMinRowChange, 100 * p.largest_row_change);
    }
    out += fmt::format("{:<28} {:>10.4g} {:>10.4g}  {}\n", p.parameter->name, p.preset, p.value,
                       status);
  }
  size_t width = 5;
  for (const GemmTiming& row : timings.rows) width = std::max(width, row.label.size());
  out += fmt::format("\n{:<{}} {:>12} {:>9} {:>8} {:>8}\n", "label", width, "measured", "TFLOP/s",
                     "preset", "fitted");
  for (size_t i = 0; i < timings.rows.size(); ++i) {
    const GemmTiming& row = timings.rows[i];
    out += fmt::format("{:<{}} {:>10.4g} s {:>9.1f} {:>8} {:>8}\n", row.label, width, row.seconds,
                       row.flops() / row.seconds / 1e12, signed_percent(fit.before[i]),
                       signed_percent(fit.after[i]));
  }
  std::vector<FittedField> fields;
  for (const GemmParameterResult& p : fit.parameters) {
    if (p.fitted) fields.push_back({p.parameter->name, p.preset, p.value});
  }
  return out + format_timings_fit_end("--gemms", timings.path, timings.rows.size(),
                                      fit.before_summary, fit.after_summary, preset, date, fields);
}

}  // namespace ppsim
