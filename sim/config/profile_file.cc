// Writing and reading cost profiles (profile_file.h). The reader walks the
// YAML tree by hand, like the config loader, so that every error can name
// the file, line, column and key path of the offending value.
#include "sim/config/profile_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/config/yaml_reader.h"

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

using yaml_util::Bound;
using yaml_util::Map;
using yaml_util::render;
using yaml_util::Value;

class Reader : public yaml_util::TreeReader {
 public:
  using TreeReader::TreeReader;

  CostProfile read(const YAML::Node& root) const;

 private:
  // The one of `values` whose name (to_string) the value is, or an error
  // listing their names.
  template <typename E, size_t N>
  E one_of(const Value& value, const std::array<E, N>& values) const {
    std::vector<std::string_view> names;
    for (const E e : values) {
      // ppsim's: TreeReader has a to_string of its own.
      if (value.node.IsScalar() && value.node.Scalar() == ppsim::to_string(e)) return e;
      names.push_back(ppsim::to_string(e));
    }
    throw_expected(value, fmt::format("one of {}", fmt::join(names, ", ")));
  }

  ProfileProvenance read_provenance(const Value& value) const;
  KernelSample read_kernel(const Value& value, int version) const;
  LinkFit read_link(const Value& value) const;
  Calibration read_calibration(const Value& value) const;
};

CostProfile Reader::read(const YAML::Node& root) const {
  Value top{"", root, root.Mark()};
  if (!top.present()) throw_error(top.mark(), "version", "missing");  // an empty file
  // The version first: a newer file is "upgrade ppsim", not a list of unknown keys.
  int version = 0;
  if (root.IsMap()) {
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar() != "version") continue;
      Value value{"version", it->second, it->first.Mark()};
      version = to_int(value, INT_MIN);
      if (version < kOldestProfileVersion || version > kProfileVersion) {
        throw_error(
            value.mark(), value.path,
            fmt::format("unsupported profile version {}; this build reads versions {} to {}",
                        version, kOldestProfileVersion, kProfileVersion));
      }
    }
  }
  // Version 1 has no calibration section: an unknown key there.
  Map tree = version == 1 ? map(top, {"version", "provenance", "kernels", "links"})
                          : map(top, {"version", "provenance", "kernels", "links", "calibration"});
  required(tree, "version");  // its value was checked above

  CostProfile profile;
  profile.version = version;
  if (tree.get("provenance").present())
    profile.provenance = read_provenance(tree.get("provenance"));

  std::map<std::tuple<KernelKind, KernelPart, int, int, int, int, int, int, int, int>, std::string>
      shapes;
  for (const Value& element : list(tree.get("kernels"))) {
    KernelSample k = read_kernel(element, version);
    auto [it, fresh] = shapes.try_emplace({k.kind, k.part, k.micro_batch, k.tokens, k.context,
                                           k.hidden, k.ffn, k.heads, k.vocab, k.tensor},
                                          element.path);
    if (!fresh)
      throw_error(element.mark(), element.path,
                  fmt::format("same kind and shape as {}", it->second));
    profile.kernels.push_back(std::move(k));
  }

  std::map<std::string, std::string> names;
  for (const Value& element : list(tree.get("links"))) {
    LinkFit link = read_link(element);
    auto [it, fresh] = names.try_emplace(link.name, element.path);
    if (!fresh)
      throw_error(element.mark(), element.path, fmt::format("same name as {}", it->second));
    profile.links.push_back(std::move(link));
  }
  if (tree.get("calibration").present()) {
    profile.calibration = read_calibration(tree.get("calibration"));
  }
  return profile;
}

// Every entry may be left out; one that is given needs both of its figures.
Calibration Reader::read_calibration(const Value& value) const {
  Map m = map(value, {"forward", "backward", "backward_input", "backward_weight", "optimizer_step",
                      "link"});
  Calibration c;
  for (const auto& [key, entry] : kCalibratedKinds) {
    const Value* given = m.find(key);
    if (given == nullptr) continue;
    Map k = map(*given, {"scale", "overhead_s"});
    c.*entry =
        KindCalibration{to_number(required(k, "scale")), to_number(required(k, "overhead_s"))};
  }
  if (const Value* given = m.find("link")) {
    Map l = map(*given, {"latency_s", "bandwidth_Bps"});
    c.link = LinkCalibration{to_number(required(l, "latency_s")),
                             to_number(required(l, "bandwidth_Bps"), Bound::kPositive)};
  }
  return c;
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

KernelSample Reader::read_kernel(const Value& value, int version) const {
  // Version 1 has blocks only: `part` and `vocab` are unknown keys there.
  Map m = version == 1
              ? map(value, {"kind", "micro_batch", "tokens", "context", "hidden", "ffn", "heads",
                            "tensor", "median_s", "min_s", "max_s", "repetitions",
                            "activation_bytes", "weight_grad_bytes"})
              : map(value, {"kind", "part", "micro_batch", "tokens", "context", "hidden", "ffn",
                            "heads", "vocab", "tensor", "median_s", "min_s", "max_s", "repetitions",
                            "activation_bytes", "weight_grad_bytes"});
  KernelSample k;
  k.kind = one_of(required(m, "kind"), kKernelKinds);
  if (m.find("part") != nullptr) k.part = one_of(m.get("part"), kKernelParts);
  k.micro_batch = to_int(required(m, "micro_batch"), 1);
  k.tokens = to_int(required(m, "tokens"), 1);
  k.context = to_int(required(m, "context"), 0);
  k.hidden = to_int(required(m, "hidden"), 1);
  // A block's shape has ffn and heads, the embedding's and head's a vocabulary.
  const bool block = k.part == KernelPart::kBlock;
  for (const char* key : {"ffn", "heads", "vocab"}) {
    const bool wanted = block == (std::string_view(key) != "vocab");
    if (wanted) continue;
    if (const Value* extra = m.find(key)) {
      throw_error(
          extra->mark(), extra->path,
          fmt::format("a {} kernel has no {}: ffn and heads are a block's, vocab the embedding's "
                      "and the head's",
                      ppsim::to_string(k.part), key));
    }
  }
  if (block) {
    k.ffn = to_int(required(m, "ffn"), 1);
    k.heads = to_int(required(m, "heads"), 1);
  } else {
    k.vocab = to_int(required(m, "vocab"), 1);
  }
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
    throw_error(value.mark(), value.path,
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
  link.bandwidth_Bps = to_number(required(m, "bandwidth_Bps"), Bound::kPositive);
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
    // A block's shape as in version 1; the other parts name themselves and their vocabulary.
    const std::string shape =
        k.part == KernelPart::kBlock
            ? fmt::format(
                  "micro_batch: {}, tokens: {}, context: {}, hidden: {}, ffn: {}, heads: {}",
                  k.micro_batch, k.tokens, k.context, k.hidden, k.ffn, k.heads)
            : fmt::format(
                  "part: {}, micro_batch: {}, tokens: {}, context: {}, hidden: {}, vocab: {}",
                  quoted(to_string(k.part)), k.micro_batch, k.tokens, k.context, k.hidden, k.vocab);
    out += fmt::format(
        "  - {{kind: {}, {}, tensor: {}, median_s: {}, min_s: {}, max_s: {}, repetitions: {}",
        quoted(to_string(k.kind)), shape, k.tensor, number(k.median_s), number(k.min_s),
        number(k.max_s), k.repetitions);
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
  if (const std::optional<Calibration>& c = profile.calibration) {
    const bool empty = *c == Calibration{};
    out += empty ? "calibration: {}\n" : "calibration:\n";
    for (const auto& [key, entry] : kCalibratedKinds) {
      if (const std::optional<KindCalibration>& k = *c.*entry) {
        out += fmt::format("  {}: {{scale: {}, overhead_s: {}}}\n", key, number(k->scale),
                           number(k->overhead_s));
      }
    }
    if (c->link) {
      out += fmt::format("  link: {{latency_s: {}, bandwidth_Bps: {}}}\n",
                         number(c->link->latency_s), number(c->link->bandwidth_Bps));
    }
  }
  return out;
}

Result<CostProfile> parse_profile(std::string_view yaml, std::string_view source) {
  return yaml_util::read_document<CostProfile>(
      yaml, source, [&](const YAML::Node& root) { return Reader(source).read(root); });
}

Result<CostProfile> load_profile(const std::string& path) {
  const Result<std::string> text = read_text_file(path, kMaxDataFileBytes);
  if (!text.ok()) return text.error();
  return parse_profile(*text, path);
}

}  // namespace ppsim
