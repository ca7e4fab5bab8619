#include "sim/fit/runs_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>
#include <utility>

#include "sim/config/yaml_reader.h"
#include "sim/core/json.h"

namespace ppsim {
namespace {

constexpr std::string_view kFormat = "ppsim-runs";

double duration_s(Picos start, Picos end) { return picos_to_seconds(end - start); }

// ---- Reading (JSON is read as YAML, which it is, to reuse the walker) ----

using yaml_util::Map;
using yaml_util::Value;

class Reader : public yaml_util::TreeReader {
 public:
  using TreeReader::TreeReader;

  RunsFile read(const YAML::Node& root) const {
    Value top{"", root, root.Mark()};
    // The format and version first: any other JSON (validate's --json
    // results, say) is told so, not given a list of unknown keys.
    if (!root.IsMap() || !root["format"] || !root["format"].IsScalar() ||
        root["format"].Scalar() != kFormat) {
      throw_error(
          top.mark(), "format",
          fmt::format("expected \"{}\": not a runs file (ppsim validate --runs-out writes one)",
                      kFormat));
    }
    const Value version{"version", root["version"], root.Mark()};
    if (int v = to_int(version, INT_MIN); v != kRunsVersion) {
      throw_error(version.node.Mark(), version.path,
                  fmt::format("unsupported runs file version {}; this build reads version {}", v,
                              kRunsVersion));
    }
    Map m = map(top, {"format", "version", "config", "set", "profile", "backend", "runs"});
    RunsFile file;
    file.config = to_string(required(m, "config"), /*non_empty=*/true);
    for (const Value& flag : list(m.get("set"))) file.sets.push_back(to_string(flag, true));
    file.profile = to_string(required(m, "profile"), /*non_empty=*/true);
    if (m.find("backend") != nullptr) file.backend = to_string(m.get("backend"));
    for (const Value& run : list(required(m, "runs"))) file.runs.push_back(read_run(run));
    return file;
  }

 private:
  RunPair read_run(const Value& value) const {
    Map m = map(value, {"schedule", "predicted_iteration_s", "measured_iteration_s", "actions",
                        "transfers", "steps"});
    RunPair run;
    run.schedule = to_string(required(m, "schedule"), true);
    run.predicted_iteration_s = to_number(required(m, "predicted_iteration_s"));
    run.measured_iteration_s = to_number(required(m, "measured_iteration_s"));
    for (const Value& element : list(required(m, "actions"))) {
      Map a = map(element, {"index", "action", "rank", "predicted_s", "measured_s"});
      ActionPair pair;
      pair.index = to_int(required(a, "index"), 0);
      const Value text = required(a, "action");
      const Result<Action> action = parse_action(to_string(text, true));
      if (!action.ok()) throw_expected(text, "an action such as \"0F1\" or \"1I0s2\"");
      pair.action = *action;
      pair.rank = to_int(required(a, "rank"), 0);
      pair.predicted_s = to_number(required(a, "predicted_s"));
      pair.measured_s = to_number(required(a, "measured_s"));
      if (pair.index != static_cast<int32_t>(run.actions.size())) {
        throw_error(
            element.mark(), element.path + ".index",
            fmt::format("expected {}: actions are listed in record order", run.actions.size()));
      }
      run.actions.push_back(pair);
    }
    for (const Value& element : list(m.get("transfers"))) {
      Map t = map(element, {"producer", "consumer", "bytes", "predicted_s", "measured_s"});
      TransferPair pair;
      for (auto [key, out] :
           {std::pair{"producer", &pair.producer}, std::pair{"consumer", &pair.consumer}}) {
        const Value index = required(t, key);
        *out = to_int(index, 0);
        if (*out >= static_cast<int32_t>(run.actions.size())) {
          throw_expected(index, fmt::format("an action index below {}", run.actions.size()));
        }
      }
      pair.bytes = to_int<int64_t>(required(t, "bytes"), 0);
      pair.predicted_s = to_number(required(t, "predicted_s"));
      pair.measured_s = to_number(required(t, "measured_s"));
      run.transfers.push_back(pair);
    }
    for (const Value& element : list(m.get("steps"))) {
      Map t = map(element, {"rank", "predicted_s", "measured_s"});
      run.steps.push_back({to_int(required(t, "rank"), 0), to_number(required(t, "predicted_s")),
                           to_number(required(t, "measured_s"))});
    }
    return run;
  }
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
  return yaml_util::read_document<RunsFile>(
      json, source, [&](const YAML::Node& root) { return Reader(source).read(root); });
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
