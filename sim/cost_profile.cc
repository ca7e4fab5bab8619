// Writing and reading cost profiles, and fitting links (cost_profile.h;
// kernel_time is in kernel_time.cc). The reader walks the YAML tree by hand,
// like the config loader, so that every error can name the file, line,
// column and key path of the offending value.
#include "sim/cost_profile.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/yaml_util.h"

namespace ppsim {
namespace {

// ---- Writing ----

// The shortest text that reads back to the same double. fmt writes "3" and
// "1e-05"; a '.' is added to the mantissa because YAML 1.1 readers (PyYAML)
// take a number without one for a string.
std::string number(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of("in.") != std::string::npos) return text;  // inf, nan, or has one
  size_t exponent = text.find('e');
  text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  return text;
}

// A double-quoted YAML string: free text (a CPU name, a date) may hold any
// character, and quoting also keeps "null" or "yes" a string.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// ---- Reading ----

// The walker throws to unwind from deep in the tree; parse_profile is the one
// place that catches, and turns it into an Error.
struct ProfileError {
  std::string message;
};

// A value in the tree with its key path, and where to point when it is wrong.
struct Value {
  std::string path;
  YAML::Node node;  // undefined when the key is absent
  YAML::Mark mark;  // its own, or its map's when absent or null

  bool present() const { return node.IsDefined() && !node.IsNull(); }
};

using yaml_util::render;

std::string child_path(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

template <typename T>
bool parse_whole(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

// The entries of a map whose keys have been checked against those allowed.
struct Map {
  Value self;
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(std::string_view key) const {
    for (const auto& [name, value] : entries) {
      if (name == key) return &value;
    }
    return nullptr;
  }
  Value get(std::string_view key) const {
    const Value* value = find(key);
    return value != nullptr ? *value : Value{child_path(self.path, key), YAML::Node(), self.mark};
  }
};

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  CostProfile read(const YAML::Node& root) const;

 private:
  [[noreturn]] void fail(const YAML::Mark& mark, std::string_view path,
                         std::string_view what) const {
    std::string where =
        mark.is_null() ? source_ : fmt::format("{}:{}:{}", source_, mark.line + 1, mark.column + 1);
    throw ProfileError{path.empty() ? fmt::format("{}: {}", where, what)
                                    : fmt::format("{}: {}: {}", where, path, what)};
  }
  [[noreturn]] void fail_expected(const Value& value, std::string_view expected) const {
    std::string got =
        value.present() ? fmt::format("got \"{}\"", render(value.node)) : "got nothing";
    fail(value.mark, value.path, fmt::format("expected {}, {}", expected, got));
  }

  Map map(const Value& value, const std::vector<std::string_view>& keys) const {
    Map map{value, {}};
    std::string allowed = fmt::format("{}", fmt::join(keys, ", "));
    if (!value.node.IsMap()) fail_expected(value, fmt::format("a map with keys {}", allowed));
    for (auto it = value.node.begin(); it != value.node.end(); ++it) {
      std::string key = render(it->first);
      std::string path = child_path(value.path, key);
      if (!it->first.IsScalar() || std::find(keys.begin(), keys.end(), key) == keys.end()) {
        fail(it->first.Mark(), path, fmt::format("unknown key, expected one of {}", allowed));
      }
      if (map.find(key) != nullptr) fail(it->first.Mark(), path, "duplicate key");
      // A null value's own mark points at whatever follows it; its key's does not.
      YAML::Mark mark = it->second.IsNull() ? it->first.Mark() : it->second.Mark();
      map.entries.emplace_back(key, Value{path, it->second, mark});
    }
    return map;
  }
  Value required(const Map& map, std::string_view key) const {
    const Value* value = map.find(key);
    if (value == nullptr) fail(map.self.mark, child_path(map.self.path, key), "missing");
    return *value;
  }
  // The elements of a list; an absent or empty value is an empty list.
  std::vector<Value> list(const Value& value) const {
    std::vector<Value> elements;
    if (!value.present()) return elements;
    if (!value.node.IsSequence()) fail_expected(value, "a list");
    for (size_t i = 0; i < value.node.size(); ++i) {
      YAML::Node element = value.node[i];
      elements.push_back(Value{fmt::format("{}[{}]", value.path, i), element,
                               element.IsNull() ? value.mark : element.Mark()});
    }
    return elements;
  }

  template <typename Int>
  Int to_int(const Value& value, Int min) const {
    Int result = 0;
    if (!value.present() || !value.node.IsScalar() || !parse_whole(value.node.Scalar(), result) ||
        result < min) {
      fail_expected(value, min == 1   ? std::string("a positive integer")
                           : min == 0 ? std::string("an integer >= 0")
                                      : std::string("an integer"));
    }
    return result;
  }
  double to_number(const Value& value, bool positive = false) const {
    double result = 0;
    bool ok = value.present() && value.node.IsScalar() &&
              parse_whole(value.node.Scalar(), result) && std::isfinite(result);
    if (!ok || result < 0 || (positive && result == 0)) {
      fail_expected(value, positive ? "a positive number" : "a number >= 0");
    }
    return result;
  }
  std::string to_string(const Value& value, bool non_empty = false) const {
    if (!value.present() || !value.node.IsScalar() || (non_empty && value.node.Scalar().empty())) {
      fail_expected(value, non_empty ? "a non-empty string" : "a string");
    }
    return value.node.Scalar();
  }

  ProfileProvenance read_provenance(const Value& value) const;
  KernelSample read_kernel(const Value& value) const;
  LinkFit read_link(const Value& value) const;

  std::string source_;
};

CostProfile Reader::read(const YAML::Node& root) const {
  Value top{"", root, root.Mark()};
  if (!top.present()) fail(top.mark, "version", "missing");  // an empty file
  // The version first: a newer file is "upgrade ppsim", not a list of unknown keys.
  if (root.IsMap()) {
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar() != "version") continue;
      Value version{"version", it->second,
                    it->second.IsNull() ? it->first.Mark() : it->second.Mark()};
      if (int v = to_int(version, INT_MIN); v != kProfileVersion) {
        fail(version.mark, version.path,
             fmt::format("unsupported profile version {}; this build reads version {}", v,
                         kProfileVersion));
      }
    }
  }
  Map tree = map(top, {"version", "provenance", "kernels", "links"});
  required(tree, "version");  // its value was checked above

  CostProfile profile;
  if (tree.get("provenance").present())
    profile.provenance = read_provenance(tree.get("provenance"));

  std::map<std::tuple<std::string, int, int, int, int, int, int, int>, std::string> shapes;
  for (const Value& element : list(tree.get("kernels"))) {
    KernelSample k = read_kernel(element);
    auto [it, fresh] = shapes.try_emplace(
        {k.kind, k.micro_batch, k.tokens, k.context, k.hidden, k.ffn, k.heads, k.tensor},
        element.path);
    if (!fresh)
      fail(element.mark, element.path, fmt::format("same kind and shape as {}", it->second));
    profile.kernels.push_back(std::move(k));
  }

  std::map<std::string, std::string> names;
  for (const Value& element : list(tree.get("links"))) {
    LinkFit link = read_link(element);
    auto [it, fresh] = names.try_emplace(link.name, element.path);
    if (!fresh) fail(element.mark, element.path, fmt::format("same name as {}", it->second));
    profile.links.push_back(std::move(link));
  }
  return profile;
}

// Every field may be left out: a hand-written profile need not know them.
ProfileProvenance Reader::read_provenance(const Value& value) const {
  Map m = map(value, {"host", "cpu", "build", "date", "tool", "repetitions", "warmup"});
  ProfileProvenance p;
  for (auto [key, out] :
       {std::pair{"host", &p.host}, std::pair{"cpu", &p.cpu}, std::pair{"build", &p.build},
        std::pair{"date", &p.date}, std::pair{"tool", &p.tool}}) {
    if (m.find(key) != nullptr) *out = to_string(m.get(key));
  }
  if (m.find("repetitions") != nullptr) p.repetitions = to_int(m.get("repetitions"), 0);
  if (m.find("warmup") != nullptr) p.warmup = to_int(m.get("warmup"), 0);
  return p;
}

KernelSample Reader::read_kernel(const Value& value) const {
  Map m = map(value, {"kind", "micro_batch", "tokens", "context", "hidden", "ffn", "heads",
                      "tensor", "median_s", "min_s", "max_s", "repetitions", "activation_bytes",
                      "weight_grad_bytes"});
  KernelSample k;
  Value kind = required(m, "kind");
  if (!kind.node.IsScalar() || std::find(kKernelKinds.begin(), kKernelKinds.end(),
                                         kind.node.Scalar()) == kKernelKinds.end()) {
    fail_expected(kind, fmt::format("one of {}", fmt::join(kKernelKinds, ", ")));
  }
  k.kind = kind.node.Scalar();
  k.micro_batch = to_int(required(m, "micro_batch"), 1);
  k.tokens = to_int(required(m, "tokens"), 1);
  k.context = to_int(required(m, "context"), 0);
  k.hidden = to_int(required(m, "hidden"), 1);
  k.ffn = to_int(required(m, "ffn"), 1);
  k.heads = to_int(required(m, "heads"), 1);
  k.tensor = to_int(required(m, "tensor"), 1);
  k.median_s = to_number(required(m, "median_s"));
  k.min_s = to_number(required(m, "min_s"));
  k.max_s = to_number(required(m, "max_s"));
  k.repetitions = to_int(required(m, "repetitions"), 1);
  if (m.find("activation_bytes") != nullptr) {
    k.activation_bytes = to_int<int64_t>(m.get("activation_bytes"), 0);
  }
  if (m.find("weight_grad_bytes") != nullptr) {
    k.weight_grad_bytes = to_int<int64_t>(m.get("weight_grad_bytes"), 0);
  }
  if (!(k.min_s <= k.median_s && k.median_s <= k.max_s)) {
    fail(value.mark, value.path,
         fmt::format("expected min_s <= median_s <= max_s, got {}, {}, {}", number(k.min_s),
                     number(k.median_s), number(k.max_s)));
  }
  return k;
}

LinkFit Reader::read_link(const Value& value) const {
  Map m = map(value, {"name", "latency_s", "bandwidth_Bps", "samples"});
  LinkFit link;
  link.name = to_string(required(m, "name"), /*non_empty=*/true);
  link.latency_s = to_number(required(m, "latency_s"));
  link.bandwidth_Bps = to_number(required(m, "bandwidth_Bps"), /*positive=*/true);
  for (const Value& element : list(m.get("samples"))) {
    Map s = map(element, {"bytes", "seconds"});
    link.samples.push_back(
        {to_int<int64_t>(required(s, "bytes"), 0), to_number(required(s, "seconds"))});
  }
  return link;
}

}  // namespace

std::string profile_to_yaml(const CostProfile& profile) {
  std::string out = "# ppsim cost profile; the format is described in docs/cost_profile.md\n";
  out += fmt::format("version: {}\n", profile.version);
  const ProfileProvenance& p = profile.provenance;
  out += fmt::format(
      "provenance:\n  host: {}\n  cpu: {}\n  build: {}\n  date: {}\n  tool: {}\n"
      "  repetitions: {}\n  warmup: {}\n",
      quoted(p.host), quoted(p.cpu), quoted(p.build), quoted(p.date), quoted(p.tool), p.repetitions,
      p.warmup);
  // One kernel per line: profiles hold thousands, and lines diff and grep well.
  out += profile.kernels.empty() ? "kernels: []\n" : "kernels:\n";
  for (const KernelSample& k : profile.kernels) {
    out += fmt::format(
        "  - {{kind: {}, micro_batch: {}, tokens: {}, context: {}, hidden: {}, ffn: {}, "
        "heads: {}, tensor: {}, median_s: {}, min_s: {}, max_s: {}, repetitions: {}",
        quoted(k.kind), k.micro_batch, k.tokens, k.context, k.hidden, k.ffn, k.heads, k.tensor,
        number(k.median_s), number(k.min_s), number(k.max_s), k.repetitions);
    // Written only when measured: 0 is what a missing key reads as.
    if (k.activation_bytes != 0) out += fmt::format(", activation_bytes: {}", k.activation_bytes);
    if (k.weight_grad_bytes != 0) {
      out += fmt::format(", weight_grad_bytes: {}", k.weight_grad_bytes);
    }
    out += "}\n";
  }
  out += profile.links.empty() ? "links: []\n" : "links:\n";
  for (const LinkFit& link : profile.links) {
    out += fmt::format("  - name: {}\n    latency_s: {}\n    bandwidth_Bps: {}\n",
                       quoted(link.name), number(link.latency_s), number(link.bandwidth_Bps));
    out += link.samples.empty() ? "    samples: []\n" : "    samples:\n";
    for (const LinkSample& s : link.samples) {
      out += fmt::format("      - {{bytes: {}, seconds: {}}}\n", s.bytes, number(s.seconds));
    }
  }
  return out;
}

Result<CostProfile> parse_profile(std::string_view yaml, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    return Error{fmt::format("{}:{}:{}: invalid YAML: {}", source, e.mark.line + 1,
                             e.mark.column + 1, e.msg)};
  } catch (const std::exception& e) {
    return Error{fmt::format("{}: {}", source, e.what())};
  }
  try {
    return Reader(source).read(root);
  } catch (const ProfileError& e) {
    return Error{e.message};
  } catch (const std::exception& e) {  // yaml-cpp's own, or allocation: never a crash
    return Error{fmt::format("{}: {}", source, e.what())};
  }
}

Result<CostProfile> load_profile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{fmt::format("{}: cannot open: {}", path, std::strerror(errno))};
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return Error{fmt::format("{}: cannot read", path)};
  return parse_profile(text.str(), path);
}

Result<LinkFit> fit_link(std::string name, std::vector<LinkSample> samples) {
  std::set<int64_t> sizes;
  for (size_t i = 0; i < samples.size(); ++i) {
    const LinkSample& s = samples[i];
    if (s.bytes < 0 || !std::isfinite(s.seconds) || s.seconds < 0) {
      return Error{
          fmt::format("link \"{}\": sample {} ({} B in {} s): expected bytes >= 0 and "
                      "seconds >= 0",
                      name, i, s.bytes, s.seconds)};
    }
    sizes.insert(s.bytes);
  }
  auto describe = [&] {
    std::string text;
    for (size_t i = 0; i < samples.size() && i < 8; ++i) {
      text +=
          fmt::format("{}{} B in {} s", i == 0 ? "" : ", ", samples[i].bytes, samples[i].seconds);
    }
    if (samples.size() > 8) text += fmt::format(", and {} more", samples.size() - 8);
    return text;
  };
  if (sizes.size() < 2) {
    return Error{fmt::format(
        "link \"{}\": need samples of at least 2 distinct sizes to fit latency and bandwidth, "
        "got {} sample(s){}{}",
        name, samples.size(), samples.empty() ? "" : ": ", describe())};
  }

  // Timing noise grows with the time, so each row is weighted by 1 / seconds:
  // unweighted, the gigabyte samples' milliseconds of noise would swamp the
  // microseconds of latency. Bytes are scaled to at most 1 so that both
  // columns are of a size.
  double smallest = 0;
  for (const LinkSample& s : samples) {
    if (s.seconds > 0 && (smallest == 0 || s.seconds < smallest)) smallest = s.seconds;
  }
  const Eigen::Index n = static_cast<Eigen::Index>(samples.size());
  const double scale = static_cast<double>(*sizes.rbegin());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd t(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    double seconds = samples[i].seconds;
    double weight = 1.0 / (seconds > 0 ? seconds : smallest > 0 ? smallest : 1.0);
    a(i, 0) = weight;
    a(i, 1) = weight * static_cast<double>(samples[i].bytes) / scale;
    t(i) = weight * seconds;
  }
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(t);
  double latency = x(0);
  double per_byte = x(1) / scale;
  if (latency < 0) {  // the best fit with latency held at 0
    latency = 0;
    per_byte = a.col(1).dot(t) / a.col(1).squaredNorm() / scale;
  }
  if (!(per_byte > 0) || !std::isfinite(per_byte)) {
    return Error{
        fmt::format("link \"{}\": time does not grow with size, so no positive bandwidth fits: {}",
                    name, describe())};
  }
  return LinkFit{std::move(name), latency, 1.0 / per_byte, std::move(samples)};
}

}  // namespace ppsim
