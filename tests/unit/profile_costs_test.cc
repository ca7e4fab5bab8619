// costs.profile: the cost table takes its layer times (and, where measured,
// bytes) from a cost profile, and a CPU profile drives a simulation whose
// iteration time is the closed form of its medians.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiler/cpu_profiler.h"
#include "sim/config/config.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/cost_profile.h"
#include "sim/plan/simulate.h"

namespace ppsim {
namespace profile_costs_test {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// Medians per layer of the hand-written profile; odd digits so that the
// picosecond rounding shows.
constexpr double kForward = 1.2345678e-3;
constexpr double kBackward = 2.4691357e-3;
constexpr double kWeight = 0.7654321e-3;
constexpr double kRecompute = 1.3e-3;

std::string kernel_line(const char* kind, int tokens, int context, double median,
                        const std::string& extra = "") {
  return "  - {kind: " + std::string(kind) + ", micro_batch: 1, tokens: " + std::to_string(tokens) +
         ", context: " + std::to_string(context) +
         ", hidden: 8, ffn: 16, heads: 2, tensor: 1, median_s: " + fmt::format("{}", median) +
         ", min_s: 0.0, max_s: 1.0, repetitions: 3" + extra + "}\n";
}

// The layer's kernels at one whole sequence of 16 tokens, bytes measured on
// the forward sample.
std::string layer_lines(int weight_grad_bytes) {
  return kernel_line(
             "forward", 16, 0, kForward,
             ", activation_bytes: 1000, weight_grad_bytes: " + std::to_string(weight_grad_bytes)) +
         kernel_line("backward", 16, 0, kBackward) +
         kernel_line("backward_weight", 16, 0, kWeight) +
         kernel_line("recompute", 16, 0, kRecompute);
}

std::string whole_sequence_profile(bool link = true) {
  std::string text = "version: 1\nkernels:\n" + layer_lines(400);
  if (link)
    text += "links:\n  - {name: \"thread-copy\", latency_s: 1.0e-06, bandwidth_Bps: 1.0e9}\n";
  return text;
}

// Medians of the two ends, and the bytes they hold after F and after I.
constexpr double kEmbedForward = 0.1234567e-3;
constexpr double kEmbedWeight = 0.2345678e-3;
constexpr double kHeadForward = 0.3456789e-3;
constexpr double kHeadBackward = 0.5678901e-3;
constexpr double kHeadWeight = 0.1987654e-3;

// A kernel of the embedding or the head at vocabulary `vocab`.
std::string part_line(const char* part, const char* kind, double median, int vocab = 32,
                      const std::string& extra = "") {
  return "  - {kind: " + std::string(kind) + ", part: " + part +
         ", micro_batch: 1, tokens: 16, context: 0, hidden: 8, vocab: " + std::to_string(vocab) +
         ", tensor: 1, median_s: " + fmt::format("{}", median) +
         ", min_s: 0.0, max_s: 1.0, repetitions: 3" + extra + "}\n";
}

// The whole-sequence profile plus the embedding and the head (version 2).
// The layer's I leaves more than its F took, as the CPU profiler measures.
std::string profile_with_ends(bool embedding = true, int vocab = 32) {
  std::string text = "version: 2\nkernels:\n" + layer_lines(1300);
  if (embedding) {
    text += part_line("embedding", "forward", kEmbedForward, vocab, ", weight_grad_bytes: 512");
    text += part_line("embedding", "backward", kEmbedWeight, vocab);
    text += part_line("embedding", "backward_weight", kEmbedWeight, vocab);
  }
  text += part_line("head", "forward", kHeadForward, vocab,
                    ", activation_bytes: 2200, weight_grad_bytes: 2100");
  text += part_line("head", "backward", kHeadBackward, vocab);
  text += part_line("head", "backward_weight", kHeadWeight, vocab);
  return text;
}

// p = 2, 4 layers (2 per stage), one 16-token sequence per microbatch, bf16.
constexpr const char* kConfig =
    "model: {layers: 4, hidden: 8, ffn_hidden: 16, heads: 2, seq_len: 16, vocab: 32}\n"
    "parallel: {pipeline: 2}\n"
    "training: {global_batch: 4, micro_batch: 1}\n"
    "costs: {profile: prof.yaml}\n";

Result<Config> config_in(const fs::path& dir, const std::string& text,
                         const std::vector<ConfigOverride>& overrides = {}) {
  return parse_config(text, (dir / "c.yaml").string(), overrides);
}

Result<CostTable> table_for(const Config& config, const std::vector<int>& slices = {}) {
  return build_cost_table(config, interleaved_stage_rank(config.num_stages(), 2), slices);
}

// Each test writes its files in a folder of its own (ctest runs the tests in
// parallel), removed afterwards.
class ProfileCosts : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir = fs::temp_directory_path() /
          ("ppsim_profile_costs_" + std::to_string(getpid()) + "_" + info->name());
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  fs::path dir;
};

TEST_F(ProfileCosts, StageTimesAreLayersTimesTheMedians) {
  write(dir / "prof.yaml", whole_sequence_profile());
  const Result<Config> config = config_in(dir, kConfig);  // no hardware: the profile times all
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->profile_path, (dir / "prof.yaml").string());
  const Result<CostTable> table = table_for(*config);
  ASSERT_TRUE(table.ok()) << table.error().message;
  ASSERT_EQ(table->stages.size(), 2u);
  for (const StageCost& stage : table->stages) {
    // Each layer's median rounded to picoseconds, then times the stage's 2 layers.
    EXPECT_EQ(stage.forward, 2 * seconds_to_picos(kForward));
    EXPECT_EQ(stage.backward, 2 * seconds_to_picos(kBackward));
    EXPECT_EQ(stage.weight_grad, 2 * seconds_to_picos(kWeight));
    EXPECT_EQ(stage.activation_bytes, 2 * 1000);
    EXPECT_EQ(stage.weight_grad_bytes, 2 * 400);
  }
  // The thread-copy link carries b s h bf16 bytes = 1 x 16 x 8 x 2.
  ASSERT_EQ(table->p2p_bytes, std::vector<int64_t>{256});
  const Picos p2p = seconds_to_picos(1e-6 + 256 / 1e9);
  EXPECT_EQ(table->p2p_forward, std::vector<Picos>{p2p});
  EXPECT_EQ(table->p2p_backward, std::vector<Picos>{p2p});
  // No hardware: no end-of-iteration work.
  EXPECT_EQ(table->grad_sync, (std::vector<Picos>{0, 0}));
  EXPECT_EQ(table->optimizer_step, (std::vector<Picos>{0, 0}));
}

// A GPU profile has no thread-copy link: its device-to-device copy stands for
// the transfers (the CUDA runtime's ranks share one GPU); with both, the
// thread-copy link is the pipeline's.
TEST_F(ProfileCosts, AGpuProfilesDeviceToDeviceLinkCarriesTheTransfers) {
  const std::string device_link =
      "  - {name: \"device-to-device\", latency_s: 2.0e-06, bandwidth_Bps: 4.0e11}\n";
  write(dir / "prof.yaml", whole_sequence_profile(false) + "links:\n" + device_link);
  const Result<Config> gpu = config_in(dir, kConfig);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  const Result<CostTable> on_gpu = table_for(*gpu);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.error().message;
  // 256 bytes (b s h bf16, as above) at 400 GB/s after 2 us.
  EXPECT_EQ(on_gpu->p2p_forward, std::vector<Picos>{seconds_to_picos(2e-6 + 256 / 4e11)});

  write(dir / "prof.yaml", whole_sequence_profile() + device_link);
  const Result<Config> both = config_in(dir, kConfig);
  ASSERT_TRUE(both.ok()) << both.error().message;
  const Result<CostTable> with_both = table_for(*both);
  ASSERT_TRUE(with_both.ok()) << with_both.error().message;
  EXPECT_EQ(with_both->p2p_forward, std::vector<Picos>{seconds_to_picos(1e-6 + 256 / 1e9)});
}

// costs.link picks the profile's link for the transfers (a GPU per rank runs
// them over NCCL), whatever else the profile measured.
TEST_F(ProfileCosts, CostsLinkNamesTheLinkThatCarriesTheTransfers) {
  write(dir / "prof.yaml",
        whole_sequence_profile() +
            "  - {name: \"device-to-device\", latency_s: 2.0e-06, bandwidth_Bps: 4.0e11}\n"
            "  - {name: \"nccl\", latency_s: 5.0e-06, bandwidth_Bps: 2.0e11}\n");
  const Result<Config> nccl = config_in(dir, kConfig, {{"costs.link", "nccl"}});
  ASSERT_TRUE(nccl.ok()) << nccl.error().message;
  EXPECT_EQ(nccl->profile_link, "nccl");
  const Result<CostTable> table = table_for(*nccl);
  ASSERT_TRUE(table.ok()) << table.error().message;
  // 256 bytes (b s h bf16) at 200 GB/s after 5 us.
  EXPECT_EQ(table->p2p_forward, std::vector<Picos>{seconds_to_picos(5e-6 + 256 / 2e11)});
  EXPECT_EQ(table->p2p_backward, table->p2p_forward);

  const Result<Config> mpi = config_in(dir, kConfig, {{"costs.link", "mpi"}});
  ASSERT_TRUE(mpi.ok()) << mpi.error().message;
  const Result<CostTable> missing = table_for(*mpi);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            (dir / "c.yaml").string() + ": " + (dir / "prof.yaml").string() +
                ": costs.link mpi: the profile has no such link (it has: thread-copy, "
                "device-to-device, nccl)");
}

// A profile times the GPT-3 block the profilers build, looked up by hidden,
// ffn and heads: a model whose block differs (here hidden 8 of 2 heads) gets
// an error at the key that makes it differ, not another block's times.
TEST_F(ProfileCosts, OnlyAGpt3BlockCanUseAProfile) {
  write(dir / "prof.yaml", whole_sequence_profile());
  const std::pair<const char*, const char*> misfits[] = {
      {"model.mlp", "swiglu"}, {"model.norm", "rmsnorm"}, {"model.kv_heads", "1"},
      {"model.head_dim", "8"}, {"model.bias", "false"},
  };
  for (const auto& [key, value] : misfits) {
    const Result<Config> config = config_in(dir, kConfig, {{key, value}});
    ASSERT_FALSE(config.ok()) << key;
    EXPECT_EQ(config.error().message,
              fmt::format("--set {0}={1}: {0}: cannot be combined with costs.profile: a profile "
                          "times the GPT-3 block the profilers build (LayerNorm, multi-head "
                          "attention of hidden / heads wide heads, a GeLU MLP, biases), looked up "
                          "by hidden, ffn and heads",
                          key, value));
  }
  // A head width of hidden / heads, given, is the GPT-3 block's.
  EXPECT_TRUE(config_in(dir, kConfig, {{"model.head_dim", "4"}}).ok());
}

TEST_F(ProfileCosts, CostsLinkNeedsAProfile) {
  const Result<Config> config =
      config_in(dir,
                "model: {layers: 4, hidden: 8, ffn_hidden: 16, heads: 2, seq_len: 16, vocab: 32}\n"
                "hardware: {preset: h200}\n"
                "parallel: {pipeline: 2}\n"
                "training: {global_batch: 4, micro_batch: 1}\n"
                "costs: {link: nccl}\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            (dir / "c.yaml").string() +
                ":5:9: costs.link: needs costs.profile: the link is one of the profile's");
}

// Without hardware the profile times everything: the first stage adds the
// embedding, the last the head, each piece's median rounded on its own.
TEST_F(ProfileCosts, TheEmbeddingAndHeadJoinTheFirstAndLastStage) {
  write(dir / "prof.yaml", profile_with_ends());
  const Result<Config> config = config_in(dir, kConfig);
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> table = table_for(*config);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const StageCost& first = table->stages[0];
  const StageCost& last = table->stages[1];
  EXPECT_EQ(first.forward, 2 * seconds_to_picos(kForward) + seconds_to_picos(kEmbedForward));
  EXPECT_EQ(first.backward, 2 * seconds_to_picos(kBackward) + seconds_to_picos(kEmbedWeight));
  EXPECT_EQ(first.weight_grad, 2 * seconds_to_picos(kWeight) + seconds_to_picos(kEmbedWeight));
  EXPECT_EQ(last.forward, 2 * seconds_to_picos(kForward) + seconds_to_picos(kHeadForward));
  EXPECT_EQ(last.backward, 2 * seconds_to_picos(kBackward) + seconds_to_picos(kHeadBackward));
  EXPECT_EQ(last.weight_grad, 2 * seconds_to_picos(kWeight) + seconds_to_picos(kHeadWeight));
  // Bytes: the layers', plus the embedding's input gradient kept from I to
  // W on the first stage and the head's on the last. What I leaves is more
  // than F took, and stays so (the table shows memory growing at I).
  EXPECT_EQ(first.activation_bytes, 2 * 1000);
  EXPECT_EQ(first.weight_grad_bytes, 2 * 1300 + 512);
  EXPECT_EQ(last.activation_bytes, 2 * 1000 + 2200);
  EXPECT_EQ(last.weight_grad_bytes, 2 * 1300 + 2100);
  // Under full recompute the layers' backward adds their recompute, the
  // ends' does not; the bytes are the model's (which counts no ends).
  const Result<Config> full = config_in(dir, kConfig, {{"training.recompute", "full"}});
  ASSERT_TRUE(full.ok()) << full.error().message;
  const Result<CostTable> recomputed = table_for(*full);
  ASSERT_TRUE(recomputed.ok()) << recomputed.error().message;
  EXPECT_EQ(recomputed->stages[1].backward,
            2 * (seconds_to_picos(kBackward) + seconds_to_picos(kRecompute)) +
                seconds_to_picos(kHeadBackward));
  EXPECT_EQ(recomputed->stages[1].activation_bytes,
            2 * layer_activation_bytes(*full->model, 1, full->parallel, Recompute::kFull));
}

// With hardware the analytic model times what the profile lacks: here the
// embedding, while the profile's head replaces the analytic logits and loss.
TEST_F(ProfileCosts, WithHardwareTheProfiledEndsReplaceTheAnalyticOnes) {
  const std::string with_hardware =
      std::string(kConfig) + "hardware: {preset: a100-80gb, gpus_per_node: 2, nodes: 1}\n";
  write(dir / "prof.yaml", profile_with_ends(/*embedding=*/false));
  const Result<Config> config = config_in(dir, with_hardware);
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> ends = table_for(*config);
  ASSERT_TRUE(ends.ok()) << ends.error().message;
  write(dir / "prof.yaml", whole_sequence_profile(/*link=*/false));
  const Result<CostTable> layers_only = table_for(*config);
  ASSERT_TRUE(layers_only.ok()) << layers_only.error().message;
  EXPECT_EQ(ends->stages[1].forward,
            2 * seconds_to_picos(kForward) + seconds_to_picos(kHeadForward));
  EXPECT_EQ(ends->stages[1].backward,
            2 * seconds_to_picos(kBackward) + seconds_to_picos(kHeadBackward));
  EXPECT_EQ(ends->stages[1].weight_grad,
            2 * seconds_to_picos(kWeight) + seconds_to_picos(kHeadWeight));
  EXPECT_NE(layers_only->stages[1].forward, ends->stages[1].forward);  // analytic logits there
  // Stage 0: the same layers and the same analytic embedding either way.
  EXPECT_EQ(ends->stages[0].forward, layers_only->stages[0].forward);
  EXPECT_GT(ends->stages[0].forward, 2 * seconds_to_picos(kForward));
  EXPECT_EQ(ends->stages[0].weight_grad_bytes, 2 * 1300);
}

TEST_F(ProfileCosts, FullRecomputeAddsTheRecomputeKernelAndKeepsTheModelsBytes) {
  write(dir / "prof.yaml", whole_sequence_profile());
  const Result<Config> config = config_in(dir, kConfig, {{"training.recompute", "full"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> table = table_for(*config);
  ASSERT_TRUE(table.ok()) << table.error().message;
  const int64_t model_bytes =
      2 * layer_activation_bytes(*config->model, 1, config->parallel, Recompute::kFull);
  for (const StageCost& stage : table->stages) {
    EXPECT_EQ(stage.forward, 2 * seconds_to_picos(kForward));
    EXPECT_EQ(stage.backward, 2 * (seconds_to_picos(kBackward) + seconds_to_picos(kRecompute)));
    EXPECT_EQ(stage.weight_grad, 2 * seconds_to_picos(kWeight));
    // The profiled block kept everything; under full recompute a layer does not.
    EXPECT_EQ(stage.activation_bytes, model_bytes);
  }
}

TEST_F(ProfileCosts, SelectiveRecomputeIsAnError) {
  write(dir / "prof.yaml", whole_sequence_profile());
  const Result<Config> config = config_in(dir, kConfig, {{"training.recompute", "selective"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> table = table_for(*config);
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().message,
            (dir / "c.yaml").string() + ": " + (dir / "prof.yaml").string() +
                ": training.recompute selective: a profile has no kernel for the attention core "
                "alone; use none or full");
}

TEST_F(ProfileCosts, WithHardwareTheEmbeddingAndLogitsStayAnalytic) {
  write(dir / "prof.yaml", whole_sequence_profile(/*link=*/false));
  const std::string with_hardware =
      std::string(kConfig) + "hardware: {preset: a100-80gb, gpus_per_node: 2, nodes: 1}\n";
  const Result<Config> profiled = config_in(dir, with_hardware);
  ASSERT_TRUE(profiled.ok()) << profiled.error().message;
  Config analytic = *profiled;
  analytic.profile_path.clear();
  const Result<CostTable> p = table_for(*profiled);
  const Result<CostTable> a = table_for(analytic);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(a.ok()) << a.error().message;
  // Stage 0 = layers + embedding, stage 1 = layers + logits: swapping the
  // layers' times moves both stages by the same amount.
  const Picos shift = p->stages[0].forward - a->stages[0].forward;
  EXPECT_EQ(p->stages[1].forward - a->stages[1].forward, shift);
  EXPECT_GT(p->stages[0].forward, 2 * seconds_to_picos(kForward));  // plus the embedding
  EXPECT_NE(p->stages[0].forward, p->stages[1].forward);
  EXPECT_EQ(p->stages[1].backward - a->stages[1].backward,
            p->stages[0].backward - a->stages[0].backward);
  // Without a thread-copy link the transfers and the rank work stay the hardware's.
  EXPECT_EQ(p->p2p_forward, a->p2p_forward);
  EXPECT_GT(p->p2p_forward[0], 0);
  EXPECT_EQ(p->optimizer_step, a->optimizer_step);
}

// Terapipe's two slices of 8 tokens, (8, 0) and (8, 8), between measured
// token counts 4 and 16 at contexts 0 and 8.
TEST_F(ProfileCosts, SlicesInterpolateBetweenMeasuredTokenCounts) {
  std::string text = "version: 1\nkernels:\n";
  for (const char* kind : {"forward", "backward", "backward_weight"}) {
    const double scale = std::string(kind) == "forward"    ? 1
                         : std::string(kind) == "backward" ? 2
                                                           : 0.5;
    text += kernel_line(kind, 4, 0, scale * 1e-3);
    text += kernel_line(kind, 16, 0, scale * 4e-3);
    text += kernel_line(kind, 4, 8, scale * 2e-3);
    text += kernel_line(kind, 16, 8, scale * 5e-3);
  }
  write(dir / "prof.yaml", text);
  const Result<Config> config =
      config_in(dir, std::string(kConfig) + "schedule: {kind: terapipe, slices: 2}\n");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> table = table_for(*config, {8, 8});
  ASSERT_TRUE(table.ok()) << table.error().message;
  ASSERT_EQ(table->num_slices, 2);
  for (int s = 0; s < 2; ++s) {
    // 8 tokens is a third of the way from 4 to 16: 2 ms at context 0, 3 ms at 8.
    EXPECT_NEAR(table->stages[s * 2].forward, 2 * 2e9, 2) << "stage " << s;
    EXPECT_NEAR(table->stages[s * 2 + 1].forward, 2 * 3e9, 2) << "stage " << s;
    EXPECT_NEAR(table->stages[s * 2 + 1].backward, 2 * 6e9, 2) << "stage " << s;
    EXPECT_NEAR(table->stages[s * 2 + 1].weight_grad, 2 * 1.5e9, 2) << "stage " << s;
    // Exactly what kernel_time gives, per layer rounded to picoseconds.
    const CostProfile profile = *load_profile((dir / "prof.yaml").string());
    EXPECT_EQ(table->stages[s * 2 + 1].forward,
              2 * seconds_to_picos(
                      kernel_time(profile, KernelKind::kForward, 1, 8, 16, 2, 1, 8, 8)->seconds));
  }
  // No bytes in this profile: the model's, per slice.
  EXPECT_GT(table->stages[0].activation_bytes, 0);
  EXPECT_LT(table->stages[0].activation_bytes, table->stages[1].activation_bytes);
}

TEST_F(ProfileCosts, BytesNeedTheExactSlice) {
  write(dir / "prof.yaml", whole_sequence_profile());
  const Result<Config> config =
      config_in(dir, std::string(kConfig) + "schedule: {kind: terapipe, slices: 2}\n");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> table = table_for(*config, {8, 8});
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(
      table.error().message,
      HasSubstr("forward activation_bytes was measured at (tokens, context) (16, 0) but not at "
                "(8, 0)"));
}

TEST_F(ProfileCosts, AShapeNotInTheProfileNamesWhatIsThere) {
  write(dir / "prof.yaml", whole_sequence_profile());
  const Result<Config> config = config_in(dir, kConfig, {{"model.hidden", "16"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> table = table_for(*config);
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().message,
            (dir / "c.yaml").string() + ": " + (dir / "prof.yaml").string() +
                ": no forward kernel of shape (micro_batch 1, hidden 16, ffn 16, heads 2, tensor "
                "1) in the profile; it has forward at (micro_batch 1, hidden 8, ffn 16, heads 2, "
                "tensor 1)");
  // The ends' shape has the vocabulary: a profile with an embedding at
  // another one is an error too, not a silent fallback to the analytic one.
  write(dir / "prof.yaml", profile_with_ends(/*embedding=*/true, /*vocab=*/64));
  const Result<CostTable> other = table_for(*config_in(dir, kConfig));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().message,
            (dir / "c.yaml").string() + ": " + (dir / "prof.yaml").string() +
                ": no embedding forward kernel of shape (micro_batch 1, hidden 8, vocab 32, "
                "tensor 1) in the profile; it has embedding forward at (micro_batch 1, hidden 8, "
                "vocab 64, tensor 1)");
}

TEST_F(ProfileCosts, AnUnreadableProfileNamesBothFiles) {
  write(dir / "prof.yaml", "version: 1\nkernels: 3\n");
  const Result<Config> config = config_in(dir, kConfig);
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> table = table_for(*config);
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().message, (dir / "c.yaml").string() + ": " + (dir / "prof.yaml").string() +
                                       ":2:10: kernels: expected a list, got \"3\"");
}

TEST_F(ProfileCosts, TheProfileMustExist) {
  const Result<Config> config = config_in(dir, kConfig);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            (dir / "c.yaml").string() + ":4:18: costs.profile: cannot read " +
                (dir / "prof.yaml").string() + ": No such file or directory");
  // From --set, relative to the working directory.
  const Result<Config> flagged = config_in(dir, kConfig, {{"costs.profile", "no/such.yaml"}});
  ASSERT_FALSE(flagged.ok());
  EXPECT_EQ(flagged.error().message,
            "--set costs.profile=no/such.yaml: costs.profile: cannot read no/such.yaml: No such "
            "file or directory");
}

TEST_F(ProfileCosts, HardwareMayBeLeftOutOnlyWithAProfile) {
  write(dir / "prof.yaml", whole_sequence_profile());
  std::string without = kConfig;
  without.erase(without.find("costs:"));
  const Result<Config> config = config_in(dir, without);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            (dir / "c.yaml").string() +
                ":1:1: hardware: required when model is given, unless costs.profile gives the "
                "layer times");
  EXPECT_TRUE(config_in(dir, kConfig).ok());
  // And a profile needs a model, whose shape picks its kernels.
  const Result<Config> no_model =
      config_in(dir,
                "parallel: {pipeline: 2}\ntraining: {global_batch: 4}\n"
                "costs: {profile: prof.yaml, fixed: {forward_s: 1.0, backward_s: 2.0}}\n");
  ASSERT_FALSE(no_model.ok());
  EXPECT_EQ(no_model.error().message,
            (dir / "c.yaml").string() +
                ":3:9: costs.profile: needs a model: the profile's kernels are looked up by the "
                "model's shape");
}

// A profile's link timed whole transfers: it cannot say what the pieces of
// a scatter/gather and their all-gather take.
TEST_F(ProfileCosts, ScatterGatherNeedsTheAnalyticModel) {
  write(dir / "prof.yaml", whole_sequence_profile());
  const Result<Config> config = config_in(dir, kConfig, {{"parallel.p2p_scatter_gather", "true"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            "--set parallel.p2p_scatter_gather=true: parallel.p2p_scatter_gather: needs the "
            "analytic model: a profile's link is a measured transfer of the whole activation, not "
            "its pieces and their all-gather");
}

TEST_F(ProfileCosts, FixedCostsStillApplyLast) {
  write(dir / "prof.yaml", whole_sequence_profile());
  const Result<Config> config = config_in(dir, std::string(kConfig) + "schedule: {kind: 1f1b}\n",
                                          {{"costs.fixed.forward_s", "0.5"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<CostTable> table = table_for(*config);
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_EQ(table->stages[0].forward, seconds_to_picos(0.5));
  EXPECT_EQ(table->stages[0].backward, 2 * seconds_to_picos(kBackward));
}

// A CPU profile, written and read back, drives a 1F1B simulation: with no
// link in the profile (dropped below) and no hardware, transfers and the
// end-of-iteration work are free, so the iteration is the closed form
// (m + p - 1)(tf + tb), tf and tb each 2 layers x the measured median.
TEST_F(ProfileCosts, EndToEndCpuProfileDrivesTheSimulation) {
  ProfileRequest request;
  request.micro_batch = 1;
  request.hidden = 8;
  request.ffn = 16;
  request.heads = 2;
  request.shapes = {{16, 0}};
  request.warmup = 0;
  request.repetitions = 1;
  // As in cpu_profiler_test: sizes where the copy, not the hand-off's noise,
  // sets the slope, so that the fit succeeds; the link is dropped below.
  request.link_sizes = {1 << 20, 1 << 22, 1 << 24};
  Result<CostProfile> profile = profile_cpu(request);
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  profile->links.clear();
  write(dir / "prof.yaml", profile_to_yaml(*profile));

  const KernelSample* forward = nullptr;
  const KernelSample* backward = nullptr;
  const KernelSample* step = nullptr;
  for (const KernelSample& k : profile->kernels) {
    if (k.kind == KernelKind::kForward) forward = &k;
    if (k.kind == KernelKind::kBackward) backward = &k;
    if (k.kind == KernelKind::kOptimizerStep) step = &k;
  }
  ASSERT_NE(forward, nullptr);
  ASSERT_NE(backward, nullptr);
  ASSERT_NE(step, nullptr);
  // Saved::bytes() in fp32 with n = b l = 16, h = 8, f = 16, a = 2, t = 16:
  // after F 6 n h + 2 n + n f + b a l t scalars (K/V rows included), after I
  // 8 n h + 2 n f + 4 h.
  EXPECT_EQ(forward->activation_bytes, 4 * (6 * 16 * 8 + 2 * 16 + 16 * 16 + 2 * 16 * 16));
  EXPECT_EQ(forward->weight_grad_bytes, 4 * (8 * 16 * 8 + 2 * 16 * 16 + 4 * 8));

  const Result<Config> config = config_in(dir, kConfig);
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<Simulation> sim = simulate(*config);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  const int m = config->num_microbatches();
  const int p = config->parallel.pipeline;
  ASSERT_EQ(m, 4);
  const Picos tf = 2 * seconds_to_picos(forward->median_s);
  const Picos tb = 2 * seconds_to_picos(backward->median_s);
  EXPECT_EQ(sim->costs.stages[0].forward, tf);
  EXPECT_EQ(sim->costs.stages[1].backward, tb);
  // Each rank steps its two blocks after the pipeline drains (no hardware:
  // no gradient sync, no pipeline-wide all-reduce).
  const Picos ts = 2 * seconds_to_picos(step->median_s);
  EXPECT_EQ(sim->costs.optimizer_step, (std::vector<Picos>{ts, ts}));
  EXPECT_DOUBLE_EQ(sim->summary.iteration_time_s, picos_to_seconds((m + p - 1) * (tf + tb) + ts));
}

}  // namespace
}  // namespace profile_costs_test
}  // namespace ppsim
