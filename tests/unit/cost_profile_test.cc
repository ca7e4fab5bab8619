#include "sim/cost/cost_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace ppsim {
namespace cost_profile_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Drops the newline after R"( so that line 1 is the first line of the text.
std::string yaml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return std::string(text);
}

std::string error_of(std::string_view text) {
  Result<CostProfile> profile = parse_profile(yaml(text), "prof.yaml");
  if (profile.ok()) return "(no error)";
  return profile.error().message;
}

KernelSample kernel(KernelKind kind, int tokens, int context, double median_s) {
  return KernelSample{kind, 1, tokens, context, 1024, 4096, 16, 1, median_s, median_s, median_s, 5};
}

CostProfile sample_profile() {
  CostProfile profile;
  // Free text that needs quoting or escaping, and counts.
  profile.provenance = {"node-7",
                        "Intel(R) Xeon(R) \"Gold\" 6338 @ 2.00GHz\ttab\\slash",
                        "Release 0.1.0 (gcc 12)",
                        "null",
                        "ppsim-profile: yes, é",
                        20,
                        3};
  // Doubles with no short decimal form, tiny and huge.
  profile.kernels = {
      {KernelKind::kForward, 2, 512, 0, 1024, 4096, 16, 2, 0.1, 1.0 / 3.0 * 0.1,
       0.30000000000000004, 20},
      {KernelKind::kBackwardWeight, 1, 128, 384, 2048, 8192, 32, 8, 1e-5, 5e-324, 123456.789e3, 7},
      {KernelKind::kRecompute, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1},
  };
  profile.links = {
      {"p2p nvlink", 2.5e-6, 1.5e11, {{0, 2.5e-6}, {1 << 20, 9.49e-6}, {int64_t{1} << 40, 7.33}}},
      {"empty", 0, 1, {}},
  };
  return profile;
}

TEST(CostProfileTest, RoundTripIsExact) {
  CostProfile profile = sample_profile();
  std::string text = profile_to_yaml(profile);
  Result<CostProfile> read = parse_profile(text, "prof.yaml");
  ASSERT_TRUE(read.ok()) << read.error().message << "\n" << text;
  EXPECT_EQ(*read, profile);
  EXPECT_EQ(read->provenance.date, "null");  // quoted, so not YAML's null
  EXPECT_EQ(read->kernels[1].min_s, 5e-324);
  EXPECT_EQ(profile_to_yaml(*read), text);  // deterministic: the same bytes again
}

TEST(CostProfileTest, WritesTheDocumentedLayout) {
  CostProfile profile;
  profile.provenance.tool = "t";
  profile.kernels = {kernel(KernelKind::kForward, 512, 0, 1e-5)};
  profile.links = {{"nvlink", 1e-6, 2.5e11, {{1024, 1.0000041e-6}}}};
  EXPECT_EQ(profile_to_yaml(profile), yaml(R"(
# ppsim cost profile; the format is described in docs/cost_profile.md
version: 2
provenance:
  host: ""
  cpu: ""
  build: ""
  date: ""
  tool: "t"
  repetitions: 0
  warmup: 0
kernels:
  - {kind: "forward", micro_batch: 1, tokens: 512, context: 0, hidden: 1024, ffn: 4096, heads: 16, tensor: 1, median_s: 1.0e-05, min_s: 1.0e-05, max_s: 1.0e-05, repetitions: 5}
links:
  - name: "nvlink"
    latency_s: 1.0e-06
    bandwidth_Bps: 250000000000.0
    samples:
      - {bytes: 1024, seconds: 1.0000041e-06}
)"));
}

TEST(CostProfileTest, EmptyListsAndMinimalProfile) {
  CostProfile empty;
  Result<CostProfile> read = parse_profile(profile_to_yaml(empty), "prof.yaml");
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, empty);
  // Provenance, kernels and links may all be left out.
  Result<CostProfile> minimal = parse_profile("version: 2\n", "prof.yaml");
  ASSERT_TRUE(minimal.ok()) << minimal.error().message;
  EXPECT_EQ(*minimal, empty);
  // A version-1 file still reads, and says which version it was.
  Result<CostProfile> old = parse_profile("version: 1\n", "prof.yaml");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(old->version, 1);
}

TEST(CostProfileTest, LoadsAFileAndNamesAMissingOne) {
  std::filesystem::path path = std::filesystem::temp_directory_path() / "ppsim_profile_test.yaml";
  std::ofstream(path) << profile_to_yaml(sample_profile());
  Result<CostProfile> read = load_profile(path.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, sample_profile());
  std::filesystem::remove(path);
  Result<CostProfile> missing = load_profile("/nonexistent/p.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "/nonexistent/p.yaml: cannot read: No such file or directory");
}

constexpr std::string_view kKernelLine =
    "kind: forward, micro_batch: 1, tokens: 512, context: 0, hidden: 1024, ffn: 4096, heads: 16, "
    "tensor: 1, median_s: 2.0e-3, min_s: 1.0e-3, max_s: 3.0e-3, repetitions: 5";

// The bytes a layer holds are optional keys: written only when measured,
// read back exactly, and 0 when absent.
TEST(CostProfileTest, MeasuredBytesRoundTripAndAreOptional) {
  CostProfile profile;
  profile.kernels = {kernel(KernelKind::kForward, 512, 0, 1e-5),
                     kernel(KernelKind::kBackward, 512, 0, 2e-5)};
  profile.kernels[0].activation_bytes = int64_t{1} << 40;
  profile.kernels[0].weight_grad_bytes = 123456789;
  const std::string text = profile_to_yaml(profile);
  EXPECT_THAT(text,
              HasSubstr(", repetitions: 5, activation_bytes: 1099511627776, weight_grad_bytes: "
                        "123456789}\n"));
  // Only the forward kernel carries bytes: none after the backward's entry.
  const size_t backward = text.find("backward");
  ASSERT_NE(backward, std::string::npos) << text;
  EXPECT_THAT(text.substr(backward), Not(HasSubstr("activation_bytes")));
  Result<CostProfile> read = parse_profile(text, "prof.yaml");
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, profile);
  EXPECT_EQ(read->kernels[1].activation_bytes, 0);
  EXPECT_EQ(error_of("version: 1\nkernels:\n  - {" + std::string(kKernelLine) +
                     ", weight_grad_bytes: -1}\n"),
            "prof.yaml:3:192: kernels[0].weight_grad_bytes: expected an integer >= 0, got \"-1\"");
}

TEST(CostProfileTest, SyntaxErrorNamesTheLocation) {
  EXPECT_EQ(error_of(R"(
version: 1
kernels:
  - {kind: forward, tokens: 512
links: []
)"),
            "prof.yaml:4:6: invalid YAML: end of map flow not found");
}

TEST(CostProfileTest, UnknownKeyIsAnError) {
  EXPECT_EQ(error_of(R"(
version: 1
provenance:
  hots: a
)"),
            "prof.yaml:3:3: provenance.hots: unknown key, expected one of host, cpu, build, date, "
            "tool, repetitions, warmup");
  EXPECT_EQ(error_of("version: 1\nkernel: []\n"),
            "prof.yaml:2:1: kernel: unknown key, expected one of version, provenance, kernels, "
            "links");
}

TEST(CostProfileTest, WrongTypeIsAnError) {
  std::string text = "version: 1\nkernels:\n  - {" + std::string(kKernelLine) + "}\n";
  text.replace(text.find("micro_batch: 1"), 14, "micro_batch: one");
  EXPECT_EQ(error_of(text),
            "prof.yaml:3:34: kernels[0].micro_batch: expected a positive "
            "integer, got \"one\"");
  EXPECT_EQ(error_of("version: 1\nlinks:\n  - name: x\n    latency_s: [1]\n"),
            "prof.yaml:4:16: links[0].latency_s: expected a number >= 0, got \"[1]\"");
  EXPECT_EQ(error_of("version: 1\nkernels: {}\n"),
            "prof.yaml:2:10: kernels: expected a list, got \"{}\"");
  // Without a version the keys listed are the current version's.
  EXPECT_EQ(error_of("- 1\n"),
            "prof.yaml:1:1: expected a map with keys version, provenance, kernels, links, "
            "calibration, got \"[1]\"");
}

TEST(CostProfileTest, MissingRequiredKeyIsAnError) {
  std::string text = "version: 1\nkernels:\n  - {" + std::string(kKernelLine) + "}\n";
  text.replace(text.find("median_s: 2.0e-3, "), 18, "");
  EXPECT_EQ(error_of(text), "prof.yaml:3:5: kernels[0].median_s: missing");
  EXPECT_EQ(error_of("kernels: []\n"), "prof.yaml:1:1: version: missing");
  EXPECT_EQ(error_of(""), "prof.yaml: version: missing");
  EXPECT_EQ(error_of("version: 1\nlinks:\n  - name: x\n    latency_s:\n    bandwidth_Bps: 1\n"),
            "prof.yaml:4:5: links[0].latency_s: expected a number >= 0, got nothing");
}

TEST(CostProfileTest, OtherVersionsAreRefusedFirst) {
  // The unknown key would be an error too; the version is what the user must hear.
  EXPECT_EQ(error_of("future_key: 1\nversion: 3\n"),
            "prof.yaml:2:10: version: unsupported profile version 3; this build reads versions 1 "
            "to 2");
  EXPECT_EQ(error_of("version: 0\n"),
            "prof.yaml:1:10: version: unsupported profile version 0; this build reads versions 1 "
            "to 2");
  EXPECT_EQ(error_of("version: one\n"),
            "prof.yaml:1:10: version: expected an integer, got \"one\"");
}

TEST(CostProfileTest, RejectsValuesThatCannotBeRight) {
  std::string line = "version: 1\nkernels:\n  - {" + std::string(kKernelLine) + "}\n";
  std::string spread = line;
  spread.replace(spread.find("min_s: 1.0e-3"), 13, "min_s: 2.5e-3");
  EXPECT_EQ(error_of(spread),
            "prof.yaml:3:5: kernels[0]: expected min_s <= median_s <= max_s, "
            "got 0.0025, 0.002, 0.003");
  std::string kind = line;
  kind.replace(kind.find("kind: forward"), 13, "kind: fwd");
  EXPECT_EQ(error_of(kind),
            "prof.yaml:3:12: kernels[0].kind: expected one of forward, backward, "
            "backward_input, backward_weight, recompute, optimizer_step, got \"fwd\"");
  EXPECT_EQ(error_of(line + "  - {" + std::string(kKernelLine) + "}\n"),
            "prof.yaml:4:5: kernels[1]: same kind and shape as kernels[0]");
  EXPECT_EQ(error_of("version: 1\nlinks:\n  - {name: a, latency_s: 0, bandwidth_Bps: 0}\n"),
            "prof.yaml:3:44: links[0].bandwidth_Bps: expected a positive number, got \"0\"");
  EXPECT_EQ(error_of("version: 1\nlinks:\n  - {name: a, latency_s: 0, bandwidth_Bps: 1}\n"
                     "  - {name: a, latency_s: 0, bandwidth_Bps: 2}\n"),
            "prof.yaml:4:5: links[1]: same name as links[0]");
  EXPECT_EQ(error_of("version: 1\nlinks:\n  - {name: a, latency_s: 0, bandwidth_Bps: 1, "
                     "samples: [{bytes: -1, seconds: 0}]}\n"),
            "prof.yaml:3:65: links[0].samples[0].bytes: expected an integer >= 0, got \"-1\"");
  EXPECT_EQ(error_of("version: 1\nprovenance: {host: a, host: b}\n"),
            "prof.yaml:2:23: provenance.host: duplicate key");
}

// ---- the embedding and the head (version 2) ----

KernelSample head(KernelKind kind, int tokens, double median_s) {
  KernelSample k = kernel(kind, tokens, 0, median_s);
  k.part = KernelPart::kHead;
  k.ffn = k.heads = 0;
  k.vocab = 50257;
  return k;
}

TEST(CostProfileTest, EmbeddingAndHeadKernelsRoundTrip) {
  CostProfile profile;
  profile.kernels = {kernel(KernelKind::kForward, 512, 0, 1e-5),
                     head(KernelKind::kForward, 512, 2e-5),
                     head(KernelKind::kBackwardInput, 512, 3e-5)};
  profile.kernels[1].activation_bytes = 7;
  profile.kernels[1].weight_grad_bytes = 9;  // more than after F: I may grow memory
  KernelSample embedding = head(KernelKind::kBackwardWeight, 512, 4e-5);
  embedding.part = KernelPart::kEmbedding;
  profile.kernels.push_back(embedding);
  const std::string text = profile_to_yaml(profile);
  // A block is written as in version 1; the other parts name themselves and
  // their vocabulary instead of ffn and heads.
  EXPECT_THAT(text, HasSubstr("\n  - {kind: \"forward\", micro_batch: 1, tokens: 512, context: 0, "
                              "hidden: 1024, ffn: 4096, heads: 16, tensor: 1, "));
  EXPECT_THAT(text,
              HasSubstr("\n  - {kind: \"forward\", part: \"head\", micro_batch: 1, tokens: 512, "
                        "context: 0, hidden: 1024, vocab: 50257, tensor: 1, median_s: 2.0e-05, "
                        "min_s: 2.0e-05, max_s: 2.0e-05, repetitions: 5, activation_bytes: 7, "
                        "weight_grad_bytes: 9}\n"));
  const Result<CostProfile> read = parse_profile(text, "prof.yaml");
  ASSERT_TRUE(read.ok()) << read.error().message << "\n" << text;
  EXPECT_EQ(*read, profile);
  EXPECT_EQ(read->kernels[0].part, KernelPart::kBlock);
  EXPECT_EQ(read->kernels[3].part, KernelPart::kEmbedding);
  // The same kind and tokens in another part is another kernel; in the same part, a repeat.
  profile.kernels.push_back(head(KernelKind::kForward, 512, 2e-5));
  const Result<CostProfile> repeated = parse_profile(profile_to_yaml(profile), "prof.yaml");
  ASSERT_FALSE(repeated.ok());
  EXPECT_EQ(repeated.error().message,
            "prof.yaml:16:5: kernels[4]: same kind and shape as kernels[1]");
}

TEST(CostProfileTest, APartHasItsOwnShapeKeys) {
  const std::string block = "version: 2\nkernels:\n  - {" + std::string(kKernelLine);
  EXPECT_EQ(error_of(block + ", vocab: 100}\n"),
            "prof.yaml:3:180: kernels[0].vocab: a block kernel has no vocab: ffn and heads are a "
            "block's, vocab the embedding's and the head's");
  EXPECT_EQ(error_of(block + ", part: tail}\n"),
            "prof.yaml:3:179: kernels[0].part: expected one of block, embedding, head, got "
            "\"tail\"");
  // The head's shape: a vocabulary, and no ffn or heads.
  std::string head_line = block + ", part: head}\n";
  EXPECT_EQ(error_of(head_line),
            "prof.yaml:3:81: kernels[0].ffn: a head kernel has no ffn: ffn and heads are a "
            "block's, vocab the embedding's and the head's");
  head_line.replace(head_line.find("ffn: 4096, heads: 16, "), 22, "");
  EXPECT_EQ(error_of(head_line), "prof.yaml:3:5: kernels[0].vocab: missing");
  head_line.replace(head_line.find("part: head"), 10, "part: head, vocab: 0");
  EXPECT_EQ(error_of(head_line),
            "prof.yaml:3:170: kernels[0].vocab: expected a positive integer, got \"0\"");
  head_line.replace(head_line.find("vocab: 0"), 8, "vocab: 8");
  const Result<CostProfile> read = parse_profile(head_line, "prof.yaml");
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->kernels[0].vocab, 8);
  EXPECT_EQ(read->kernels[0].ffn, 0);
  // Version 1 had blocks only.
  EXPECT_EQ(error_of("version: 1\nkernels:\n  - {" + std::string(kKernelLine) + ", part: block}\n"),
            "prof.yaml:3:173: kernels[0].part: unknown key, expected one of kind, micro_batch, "
            "tokens, context, hidden, ffn, heads, tensor, median_s, min_s, max_s, repetitions, "
            "activation_bytes, weight_grad_bytes");
}

// ---- fit_link ----

std::vector<LinkSample> line_samples(double latency_s, double bandwidth_Bps) {
  std::vector<LinkSample> samples;
  for (int64_t bytes = 1024; bytes <= (int64_t{1} << 30); bytes *= 4) {
    samples.push_back({bytes, latency_s + static_cast<double>(bytes) / bandwidth_Bps});
  }
  return samples;
}

TEST(FitLinkTest, RecoversANoiselessLine) {
  Result<LinkFit> fit = fit_link("nvlink", line_samples(5e-6, 2.5e10));
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_EQ(fit->name, "nvlink");
  EXPECT_NEAR(fit->latency_s, 5e-6, 5e-6 * 1e-9);
  EXPECT_NEAR(fit->bandwidth_Bps, 2.5e10, 2.5e10 * 1e-12);
  EXPECT_EQ(fit->samples, line_samples(5e-6, 2.5e10));  // kept as given
}

TEST(FitLinkTest, RecoversANoisyLineWithinTwoPercent) {
  // +-5% uniform noise, 16 repetitions per size, a fixed seed. mt19937's
  // output is fixed by the standard; the library's distributions are not.
  std::mt19937 gen(42);
  std::vector<LinkSample> samples;
  for (int rep = 0; rep < 16; ++rep) {
    for (const LinkSample& s : line_samples(5e-6, 2.5e10)) {
      double noise = 0.05 * (2.0 * static_cast<double>(gen()) / 4294967296.0 - 1.0);
      samples.push_back({s.bytes, s.seconds * (1.0 + noise)});
    }
  }
  Result<LinkFit> fit = fit_link("ib", samples);
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_NEAR(fit->latency_s, 5e-6, 5e-6 * 0.02);
  EXPECT_NEAR(fit->bandwidth_Bps, 2.5e10, 2.5e10 * 0.02);
}

TEST(FitLinkTest, HoldsLatencyAtZeroRatherThanNegative) {
  // The line through both, 1.2e-9 s/B - 0.3e-6 s, would give small messages
  // negative times. Through the origin, each row weighted by 1 / seconds, the
  // seconds per byte are sum(b / t) / sum(b^2 / t^2).
  Result<LinkFit> fit = fit_link("pcie", {{1000, 0.9e-6}, {2000, 2.1e-6}});
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_EQ(fit->latency_s, 0.0);
  double per_byte = (1000 / 0.9e-6 + 2000 / 2.1e-6) /
                    (1000.0 * 1000 / (0.9e-6 * 0.9e-6) + 2000.0 * 2000 / (2.1e-6 * 2.1e-6));
  EXPECT_DOUBLE_EQ(fit->bandwidth_Bps, 1.0 / per_byte);
}

TEST(FitLinkTest, Errors) {
  EXPECT_EQ(fit_link("x", {}).error().message,
            "link \"x\": need samples of at least 2 distinct sizes to fit latency and bandwidth, "
            "got 0 sample(s)");
  EXPECT_EQ(fit_link("x", {{1024, 1e-5}, {1024, 2e-5}}).error().message,
            "link \"x\": need samples of at least 2 distinct sizes to fit latency and bandwidth, "
            "got 2 sample(s): 1024 B in 1e-05 s, 1024 B in 2e-05 s");
  EXPECT_EQ(fit_link("x", {{1024, 2e-5}, {4096, 1e-5}}).error().message,
            "link \"x\": time does not grow with size, so no positive bandwidth fits: 1024 B in "
            "2e-05 s, 4096 B in 1e-05 s");
  EXPECT_EQ(fit_link("x", {{1024, 1e-5}, {4096, -1e-5}}).error().message,
            "link \"x\": sample 1 (4096 B in -1e-05 s): expected bytes >= 0 and seconds >= 0");
}

// ---- kernel_time ----

// forward at micro_batch 1, hidden 1024, ffn 4096, heads 16, tensor 1:
//   context 0:    512 -> 1 ms, 1024 -> 3 ms
//   context 1024: 512 -> 2 ms, 1024 -> 5 ms
CostProfile grid_profile() {
  CostProfile profile;
  profile.kernels = {
      kernel(KernelKind::kForward, 1024, 0, 3e-3), kernel(KernelKind::kForward, 512, 0, 1e-3),
      kernel(KernelKind::kForward, 512, 1024, 2e-3), kernel(KernelKind::kForward, 1024, 1024, 5e-3),
      kernel(KernelKind::kBackward, 512, 0, 4e-3)};
  return profile;
}

Interpolated forward_at(const CostProfile& profile, int tokens, int context) {
  Result<Interpolated> t =
      kernel_time(profile, KernelKind::kForward, 1, 1024, 4096, 16, 1, tokens, context);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return t.ok() ? *t : Interpolated{-1, false};
}

TEST(KernelTimeTest, ExactAtMeasuredPoints) {
  CostProfile profile = grid_profile();
  for (const KernelSample& k : profile.kernels) {
    if (k.kind != KernelKind::kForward) continue;
    Interpolated t = forward_at(profile, k.tokens, k.context);
    EXPECT_EQ(t.seconds, k.median_s);
    EXPECT_FALSE(t.extrapolated);
  }
}

TEST(KernelTimeTest, LinearBetweenTokenCounts) {
  Interpolated t = forward_at(grid_profile(), 768, 0);  // halfway: (1 + 3) / 2 ms
  EXPECT_DOUBLE_EQ(t.seconds, 2e-3);
  EXPECT_FALSE(t.extrapolated);
  EXPECT_DOUBLE_EQ(forward_at(grid_profile(), 640, 1024).seconds, 2.75e-3);  // 2 + 3/4 ms
}

TEST(KernelTimeTest, BilinearWhenContextVariesToo) {
  // At context 512 (halfway): tokens 512 -> 1.5 ms, 1024 -> 4 ms; tokens 768 -> 2.75 ms.
  Interpolated t = forward_at(grid_profile(), 768, 512);
  EXPECT_DOUBLE_EQ(t.seconds, 2.75e-3);
  EXPECT_FALSE(t.extrapolated);
}

TEST(KernelTimeTest, ExtrapolationIsFlagged) {
  CostProfile profile = grid_profile();
  Interpolated above = forward_at(profile, 2048, 0);  // 3 ms + 1024 x 2 ms / 512
  EXPECT_DOUBLE_EQ(above.seconds, 7e-3);
  EXPECT_TRUE(above.extrapolated);
  Interpolated below = forward_at(profile, 384, 0);  // 1 ms - 128 x 2 ms / 512
  EXPECT_DOUBLE_EQ(below.seconds, 0.5e-3);
  EXPECT_TRUE(below.extrapolated);
  EXPECT_EQ(forward_at(profile, 1, 0).seconds, 0.0);    // the line goes negative; time does not
  Interpolated later = forward_at(profile, 512, 2048);  // 2 ms + 1 ms per 1024 of context
  EXPECT_DOUBLE_EQ(later.seconds, 3e-3);
  EXPECT_TRUE(later.extrapolated);
}

TEST(KernelTimeTest, OneMeasuredPointScalesWithTokens) {
  CostProfile profile = grid_profile();
  Result<Interpolated> t =
      kernel_time(profile, KernelKind::kBackward, 1, 1024, 4096, 16, 1, 1024, 0);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_DOUBLE_EQ(t->seconds, 8e-3);
  EXPECT_TRUE(t->extrapolated);
  // Only context 0 was measured: it stands for any context, flagged.
  Result<Interpolated> c =
      kernel_time(profile, KernelKind::kBackward, 1, 1024, 4096, 16, 1, 512, 512);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->seconds, 4e-3);
  EXPECT_TRUE(c->extrapolated);
}

TEST(KernelTimeTest, PartsAreLookedUpByTheirOwnShape) {
  CostProfile profile = grid_profile();
  for (int tokens : {512, 1024}) {
    KernelSample k = head(KernelKind::kForward, tokens, tokens * 1e-6);
    profile.kernels.push_back(k);
  }
  const KernelShape shape{KernelPart::kHead, 1, 1024, 0, 0, 50257, 1};
  Result<Interpolated> t = kernel_time(profile, KernelKind::kForward, shape, 768, 0);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_DOUBLE_EQ(t->seconds, 768e-6);  // the head's line, not the block's 2 ms
  EXPECT_FALSE(t->extrapolated);
  KernelShape other = shape;
  other.vocab = 32000;
  EXPECT_EQ(kernel_time(profile, KernelKind::kForward, other, 512, 0).error().message,
            "no head forward kernel of shape (micro_batch 1, hidden 1024, vocab 32000, tensor 1) "
            "in the profile; it has head forward at (micro_batch 1, hidden 1024, vocab 50257, "
            "tensor 1)");
  EXPECT_EQ(kernel_time(profile, KernelKind::kBackward, shape, 512, 0).error().message,
            "no head backward kernel in the profile; it has forward");
  other.part = KernelPart::kEmbedding;
  EXPECT_EQ(kernel_time(profile, KernelKind::kForward, other, 512, 0).error().message,
            "no embedding forward kernel in the profile; it has no embedding kernels");
}

TEST(KernelTimeTest, MissingShapeNamesWhatThereIs) {
  CostProfile profile = grid_profile();
  EXPECT_EQ(
      kernel_time(profile, KernelKind::kForward, 2, 1024, 4096, 16, 1, 512, 0).error().message,
      "no forward kernel of shape (micro_batch 2, hidden 1024, ffn 4096, heads 16, tensor "
      "1) in the profile; it has forward at (micro_batch 1, hidden 1024, ffn 4096, heads "
      "16, tensor 1)");
  EXPECT_EQ(
      kernel_time(profile, KernelKind::kRecompute, 1, 1024, 4096, 16, 1, 512, 0).error().message,
      "no recompute kernel in the profile; it has forward, backward");
  EXPECT_EQ(kernel_time(CostProfile{}, KernelKind::kRecompute, 1, 1, 1, 1, 1, 1, 0).error().message,
            "no recompute kernel in the profile; it has no kernels");
  EXPECT_EQ(kernel_time(profile, KernelKind::kOptimizerStep, 1, 1024, 4096, 16, 1, 512, 0)
                .error()
                .message,
            "the optimizer step is timed once per shape, not over tokens and context: read its "
            "sample");
  EXPECT_EQ(kernel_time(profile, KernelKind::kForward, 1, 1024, 4096, 16, 1, 0, 0).error().message,
            "kernel time of 0 tokens after 0 of context: expected tokens >= 1 and context >= 0");
}

}  // namespace
}  // namespace cost_profile_test
}  // namespace ppsim
