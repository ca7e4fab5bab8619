#include "sim/fit/runs_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>
#include <utility>

#include "sim/core/json.h"
#include "sim/core/text_file.h"
#include "sim/fit/json_reader.h"

namespace ppsim {
namespace {

constexpr std::string_view kFormat = "ppsim-runs";
constexpr std::string_view kNotRunsFile =
    "format: expected \"ppsim-runs\": not a runs file (ppsim validate --runs-out writes one)";

double duration_s(Picos start, Picos end) { return picos_to_seconds(end - start); }

// ---- Reading ----

using json_reader::Map;
using json_reader::Value;
using json_reader::Walker;

class Reader {
 public:
  explicit Reader(const Walker& walk) : walk_(walk) {}

  RunsFile read() const {
    const Value top = walk_.root();
    // The format and version first: any other JSON (validate's --json
    // results, say) is told so, not given a list of unknown keys.
    const Value format = Map(top).get("format");  // parse_runs saw an object
    if (!format.present() || !format.json->is_string() ||
        format.json->get<std::string>() != kFormat) {
      walk_.throw_error(Value{"", top.json}, kNotRunsFile);
    }
    const Value version = Map(top).get("version");
    if (const int v = walk_.to_int(version, INT_MIN); v != kRunsVersion) {
      walk_.throw_error(version, fmt::format("unsupported runs file version {}; this build reads "
                                             "version {}",
                                             v, kRunsVersion));
    }
    const Map m =
        walk_.map(top, {"format", "version", "config", "set", "profile", "backend", "runs"});
    RunsFile file;
    file.config = walk_.to_string(walk_.required(m, "config"), /*non_empty=*/true);
    for (const Value& flag : walk_.list(m.get("set")))
      file.sets.push_back(walk_.to_string(flag, true));
    file.profile = walk_.to_string(walk_.required(m, "profile"), /*non_empty=*/true);
    if (m.has("backend")) file.backend = walk_.to_string(m.get("backend"));
    for (const Value& run : walk_.list(walk_.required(m, "runs")))
      file.runs.push_back(read_run(run));
    return file;
  }

 private:
  RunPair read_run(const Value& value) const {
    const Map m = walk_.map(value, {"schedule", "predicted_iteration_s", "measured_iteration_s",
                                    "actions", "transfers", "steps"});
    RunPair run;
    run.schedule = walk_.to_string(walk_.required(m, "schedule"), true);
    run.predicted_iteration_s = walk_.to_number(walk_.required(m, "predicted_iteration_s"));
    run.measured_iteration_s = walk_.to_number(walk_.required(m, "measured_iteration_s"));
    for (const Value& element : walk_.list(walk_.required(m, "actions"))) {
      run.actions.push_back(read_action(element, run.actions.size()));
    }
    for (const Value& element : walk_.list(m.get("transfers"))) {
      const Map t =
          walk_.map(element, {"producer", "consumer", "bytes", "predicted_s", "measured_s"});
      TransferPair pair;
      for (auto [key, out] :
           {std::pair{"producer", &pair.producer}, std::pair{"consumer", &pair.consumer}}) {
        const Value index = walk_.required(t, key);
        *out = walk_.to_int(index, 0);
        if (*out >= static_cast<int32_t>(run.actions.size())) {
          walk_.throw_expected(index, fmt::format("an action index below {}", run.actions.size()));
        }
      }
      pair.bytes = walk_.to_int<int64_t>(walk_.required(t, "bytes"), 0);
      pair.predicted_s = walk_.to_number(walk_.required(t, "predicted_s"));
      pair.measured_s = walk_.to_number(walk_.required(t, "measured_s"));
      run.transfers.push_back(pair);
    }
    for (const Value& element : walk_.list(m.get("steps"))) {
      const Map t = walk_.map(element, {"rank", "predicted_s", "measured_s"});
      run.steps.push_back({walk_.to_int(walk_.required(t, "rank"), 0),
                           walk_.to_number(walk_.required(t, "predicted_s")),
                           walk_.to_number(walk_.required(t, "measured_s"))});
    }
    return run;
  }

  // The `expected_index`-th action of a run: actions are listed in record order.
  ActionPair read_action(const Value& element, size_t expected_index) const {
    const Map a = walk_.map(element, {"index", "action", "rank", "predicted_s", "measured_s"});
    ActionPair pair;
    const Value index = walk_.required(a, "index");
    pair.index = walk_.to_int(index, 0);
    const Value text = walk_.required(a, "action");
    const Result<Action> action = parse_action(walk_.to_string(text, true));
    if (!action.ok()) walk_.throw_expected(text, "an action such as \"0F1\" or \"1I0s2\"");
    pair.action = *action;
    pair.rank = walk_.to_int(walk_.required(a, "rank"), 0);
    pair.predicted_s = walk_.to_number(walk_.required(a, "predicted_s"));
    pair.measured_s = walk_.to_number(walk_.required(a, "measured_s"));
    if (pair.index != static_cast<int32_t>(expected_index)) {
      walk_.throw_error(
          index, fmt::format("expected {}: actions are listed in record order", expected_index));
    }
    return pair;
  }

  const Walker& walk_;
};

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

RunPair pair_runs(std::string schedule, const Timeline& predicted, const Timeline& measured,
                  size_t n, int first, int count) {
  PPSIM_CHECK(count >= 1 && predicted.actions.size() >= n);
  PPSIM_CHECK(measured.actions.size() >= n * (first + count));
  RunPair run;
  run.schedule = std::move(schedule);
  for (size_t i = 0; i < n; ++i) {
    const ActionRecord& p = predicted.actions[i];
    std::vector<double> samples;
    for (int k = first; k < first + count; ++k) {
      const ActionRecord& m = measured.actions[k * n + i];
      samples.push_back(duration_s(m.start, m.end));
    }
    run.actions.push_back({static_cast<int32_t>(i), p.action, p.rank, duration_s(p.start, p.end),
                           median(std::move(samples))});
  }
  // Transfers by (producer, consumer) within one iteration.
  std::map<std::pair<int32_t, int32_t>, std::vector<double>> measured_s;
  for (const TransferRecord& x : measured.transfers) {
    const int32_t k = x.producer / static_cast<int32_t>(n);
    if (k < first || k >= first + count) continue;
    const int32_t base = k * static_cast<int32_t>(n);
    measured_s[{x.producer - base, x.consumer - base}].push_back(duration_s(x.start, x.end));
  }
  for (const TransferRecord& x : predicted.transfers) {
    if (x.producer >= static_cast<int32_t>(n)) continue;  // a later iteration's
    const auto it = measured_s.find({x.producer, x.consumer});
    if (it == measured_s.end()) continue;
    run.transfers.push_back({x.producer, x.consumer, predicted.bytes(x), duration_s(x.start, x.end),
                             median(it->second)});
  }
  std::map<int32_t, std::vector<double>> steps_s;
  for (const EpilogueRecord& e : measured.epilogue) {
    if (e.kind != EpilogueKind::kOptimizerStep || e.iteration < first ||
        e.iteration >= first + count) {
      continue;
    }
    steps_s[e.rank].push_back(duration_s(e.start, e.end));
  }
  for (const EpilogueRecord& e : predicted.epilogue) {
    if (e.kind != EpilogueKind::kOptimizerStep || e.iteration != 0) continue;
    const auto it = steps_s.find(e.rank);
    if (it != steps_s.end()) {
      run.steps.push_back({e.rank, duration_s(e.start, e.end), median(it->second)});
    }
  }
  return run;
}

std::string runs_to_json(const RunsFile& runs) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().field("format", kFormat).field("version", runs.version);
  w.field("config", runs.config).key("set").begin_array();
  for (const std::string& flag : runs.sets) w.value(flag);
  w.end_array().field("profile", runs.profile).field("backend", runs.backend);
  w.key("runs").begin_array();
  for (const RunPair& run : runs.runs) {
    w.begin_object().field("schedule", run.schedule);
    w.field("predicted_iteration_s", run.predicted_iteration_s);
    w.field("measured_iteration_s", run.measured_iteration_s);
    w.key("actions").begin_array();
    for (const ActionPair& a : run.actions) {
      w.begin_object().field("index", a.index).field("action", to_string(a.action));
      w.field("rank", a.rank).field("predicted_s", a.predicted_s);
      w.field("measured_s", a.measured_s).end_object();
    }
    w.end_array().key("transfers").begin_array();
    for (const TransferPair& t : run.transfers) {
      w.begin_object().field("producer", t.producer).field("consumer", t.consumer);
      w.field("bytes", t.bytes).field("predicted_s", t.predicted_s);
      w.field("measured_s", t.measured_s).end_object();
    }
    w.end_array().key("steps").begin_array();
    for (const StepPair& s : run.steps) {
      w.begin_object().field("rank", s.rank).field("predicted_s", s.predicted_s);
      w.field("measured_s", s.measured_s).end_object();
    }
    w.end_array().end_object();
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

Result<RunsFile> parse_runs(std::string_view json, std::string_view source) {
  // A runs file is a JSON object: anything else (a YAML config given by
  // mistake, say) is told what is expected rather than where JSON's syntax
  // stops.
  const size_t first = json.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || json[first] != '{') {
    const json_reader::Place place =
        json_reader::LineIndex(json).place(std::min(first, json.size()));
    return Error{fmt::format("{}: {}", json_reader::located(source, place), kNotRunsFile)};
  }
  return json_reader::read_json<RunsFile>(json, source,
                                          [](const Walker& walk) { return Reader(walk).read(); });
}

Result<RunsFile> load_runs(const std::string& path) {
  const Result<std::string> text = read_text_file(path, kMaxDataFileBytes);
  if (!text.ok()) return text.error();
  Result<RunsFile> runs = parse_runs(*text, path);
  if (!runs.ok()) return runs;
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  for (std::string* p : {&runs->config, &runs->profile}) {
    if (std::filesystem::path(*p).is_relative()) *p = (folder / *p).lexically_normal().string();
  }
  return runs;
}

}  // namespace ppsim
