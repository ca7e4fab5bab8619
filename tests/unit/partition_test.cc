#include "sim/cost/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config.h"
#include "sim/cost/cost_model.h"

namespace ppsim {
namespace partition_test {
namespace {

// ------------------------------------------------------------ brute force

// The costs of the stages of `split`, summed layer by layer (not by the
// prefix sums partition_layers uses).
std::vector<double> stage_costs(const std::vector<double>& cost, const std::vector<int>& split,
                                double first, double last) {
  std::vector<double> stages;
  size_t layer = 0;
  for (size_t k = 0; k < split.size(); ++k) {
    double stage = 0;
    for (int n = 0; n < split[k]; ++n) stage += cost[layer++];
    if (k == 0) stage += first;
    if (k + 1 == split.size()) stage += last;
    stages.push_back(stage);
  }
  return stages;
}

double bottleneck(const std::vector<double>& cost, const std::vector<int>& split, double first,
                  double last) {
  const std::vector<double> stages = stage_costs(cost, split, first, last);
  return *std::max_element(stages.begin(), stages.end());
}

double sum_of_squares(const std::vector<double>& cost, const std::vector<int>& split, double first,
                      double last) {
  double total = 0;
  for (double c : stage_costs(cost, split, first, last)) total += c * c;
  return total;
}

// Calls `visit` on every composition of `layers` into `stages` parts >= 1, in
// lexicographic order.
void compositions(int layers, int stages, const std::function<void(const std::vector<int>&)>& visit,
                  std::vector<int>& prefix) {
  if (stages == 1) {
    prefix.push_back(layers);
    visit(prefix);
    prefix.pop_back();
    return;
  }
  for (int n = 1; n <= layers - (stages - 1); ++n) {
    prefix.push_back(n);
    compositions(layers - n, stages - 1, visit, prefix);
    prefix.pop_back();
  }
}

struct Optimum {
  double bottleneck = std::numeric_limits<double>::infinity();
  double sum_of_squares = std::numeric_limits<double>::infinity();
  std::vector<int> first_split;  // the lexicographically smallest reaching both
};

// The optimum over every composition: the least bottleneck, then the least
// sum of squares. Compositions come in lexicographic order and only a
// strictly better one replaces the best, so the split kept is the
// lexicographically smallest optimal one (exact when all sums are).
Optimum brute_force(const std::vector<double>& cost, int stages, double first, double last) {
  Optimum best;
  std::vector<int> prefix;
  compositions(
      static_cast<int>(cost.size()), stages,
      [&](const std::vector<int>& split) {
        const double b = bottleneck(cost, split, first, last);
        const double q = sum_of_squares(cost, split, first, last);
        if (b < best.bottleneck || (b == best.bottleneck && q < best.sum_of_squares)) {
          best = Optimum{b, q, split};
        }
      },
      prefix);
  return best;
}

std::vector<int> split_ok(const std::vector<double>& cost, int stages, double first, double last) {
  Result<std::vector<int>> split = partition_layers(cost, stages, first, last);
  EXPECT_TRUE(split.ok()) << (split.ok() ? "" : split.error().message);
  return split.ok() ? *split : std::vector<int>{};
}

int sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

// --------------------------------------------------------- partition_layers

TEST(PartitionLayers, MatchesBruteForceOnRandomRealCosts) {
  std::mt19937 rng(20240611);
  // rng() % n rather than a distribution: the same draws on every library.
  auto real = [&](int max_milli) { return static_cast<double>(rng() % max_milli) / 1000.0; };
  for (int trial = 0; trial < 300; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 10);
    const int stages = 1 + static_cast<int>(rng() % std::min(4, layers));
    std::vector<double> cost(layers);
    for (double& c : cost) c = real(5000);
    const double first = real(3000);
    const double last = real(6000);
    const std::vector<int> split = split_ok(cost, stages, first, last);
    ASSERT_EQ(static_cast<int>(split.size()), stages);
    EXPECT_EQ(sum(split), layers);
    EXPECT_GE(*std::min_element(split.begin(), split.end()), 1);
    const Optimum best = brute_force(cost, stages, first, last);
    // Random reals: ties are unlikely, so both figures must be the optimum's.
    EXPECT_NEAR(bottleneck(cost, split, first, last), best.bottleneck, 1e-9 * (1 + best.bottleneck))
        << "trial " << trial;
    EXPECT_NEAR(sum_of_squares(cost, split, first, last), best.sum_of_squares,
                1e-9 * (1 + best.sum_of_squares))
        << "trial " << trial;
  }
}

// Small integer costs make ties common and every sum exact, so the tie rule
// (least sum of squares, then the lexicographically smallest split) is
// checked exactly.
TEST(PartitionLayers, BreaksTiesByEvennessThenLexicographically) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 10);
    const int stages = 1 + static_cast<int>(rng() % std::min(4, layers));
    std::vector<double> cost(layers);
    for (double& c : cost) c = static_cast<double>(rng() % 4);
    const double first = static_cast<double>(rng() % 3);
    const double last = static_cast<double>(rng() % 5);
    const Optimum best = brute_force(cost, stages, first, last);
    EXPECT_EQ(split_ok(cost, stages, first, last), best.first_split) << "trial " << trial;
  }
}

TEST(PartitionLayers, EqualLayersWithoutExtrasSplitEvenly) {
  EXPECT_EQ(split_ok(std::vector<double>(12, 1.0), 4, 0, 0), (std::vector<int>{3, 3, 3, 3}));
  EXPECT_EQ(split_ok(std::vector<double>(96, 0.1), 8, 0, 0), std::vector<int>(8, 12));
  EXPECT_EQ(split_ok(std::vector<double>(5, 2.0), 5, 0, 0), std::vector<int>(5, 1));
  // 10 over 4: some stage takes 3; {3, 3, 3, 1} and {3, 3, 2, 2} both reach
  // that, but the squares sum to 28 and 26: two stages of 2, and the first
  // ordering of {2, 2, 3, 3}.
  EXPECT_EQ(split_ok(std::vector<double>(10, 0.1), 4, 0, 0), (std::vector<int>{2, 2, 3, 3}));
  // 0.1 is not a binary fraction: sums of 12 layers at different offsets
  // differ in the last bits, which must not break the tie of 240 over 20.
  EXPECT_EQ(split_ok(std::vector<double>(240, 0.1), 20, 0, 0), std::vector<int>(20, 12));
}

TEST(PartitionLayers, BigLastExtraMovesLayersOffTheLastStage) {
  // 8 layers of 1 over 4 stages, the last also paying 1.5. Stage costs are
  // n (first three) and n + 1.5 (last), so the optimum is one of 1, 2, 2.5, 3:
  //   bound 2.5: stages 0-2 hold <= 2 layers each, the last <= 1: 7 < 8, too few;
  //   bound 3:   stages 0-2 hold <= 3 each, the last <= 1: 10 >= 8, feasible.
  // The last stage gets 1 layer (2 would cost 3.5), and the first three share
  // 7 with at most 3 each: {3, 3, 1} (squares 19) or {3, 2, 2} (17). The most
  // even, first ordering: {2, 2, 3}, then the last stage's 1.
  const std::vector<double> cost(8, 1.0);
  const std::vector<int> split = split_ok(cost, 4, 0, 1.5);
  EXPECT_EQ(split, (std::vector<int>{2, 2, 3, 1}));
  EXPECT_DOUBLE_EQ(bottleneck(cost, split, 0, 1.5), 3.0);
  // The even split would cost 2 + 1.5 on the last stage.
  EXPECT_DOUBLE_EQ(bottleneck(cost, {2, 2, 2, 2}, 0, 1.5), 3.5);
}

TEST(PartitionLayers, BigFirstExtraMovesLayersOffTheFirstStage) {
  // 6 layers of 1 over 3 stages, the first paying 2: bound 2 would leave no
  // layer to stage 0; bound 3 holds 1 + 3 + 3 = 7 >= 6. So stage 0 holds 1
  // layer (cost 3), and the other two share 5 as {2, 3} or {3, 2} (equal
  // squares): the first ordering.
  EXPECT_EQ(split_ok(std::vector<double>(6, 1.0), 3, 2.0, 0), (std::vector<int>{1, 2, 3}));
}

TEST(PartitionLayers, OneStagePaysBothExtras) {
  EXPECT_EQ(split_ok({1, 2, 3}, 1, 10, 20), std::vector<int>{3});
}

TEST(PartitionLayers, Errors) {
  auto error = [](const std::vector<double>& cost, int stages, double first, double last) {
    Result<std::vector<int>> split = partition_layers(cost, stages, first, last);
    return split.ok() ? std::string("(no error)") : split.error().message;
  };
  EXPECT_EQ(error({1, 1}, 0, 0, 0), "layer split: 0 stages; need at least one");
  EXPECT_EQ(error({1, 1}, 3, 0, 0),
            "layer split: 2 layers over 3 stages; every stage needs at least one layer");
  EXPECT_EQ(error({}, 1, 0, 0),
            "layer split: 0 layers over 1 stages; every stage needs at least one layer");
  EXPECT_EQ(error({1, -1}, 1, 0, 0), "layer split: layer 1 costs -1; expected a finite time >= 0");
  EXPECT_EQ(error({1, std::nan("")}, 1, 0, 0),
            "layer split: layer 1 costs nan; expected a finite time >= 0");
  EXPECT_EQ(error({1, 1}, 1, -0.5, 0),
            "layer split: the first stage's extra (embedding) costs -0.5; expected a finite time "
            ">= 0");
  EXPECT_EQ(error({1, 1}, 1, 0, std::numeric_limits<double>::infinity()),
            "layer split: the last stage's extra (logits) costs inf; expected a finite time >= 0");
  const double big = std::numeric_limits<double>::max();
  EXPECT_EQ(error({big, big}, 1, 0, 0),
            "layer split: the costs are too large; their sum squared overflows a double");
  EXPECT_EQ(error({1e200}, 1, 0, 0),
            "layer split: the costs are too large; their sum squared overflows a double");
}

// ------------------------------------------------- parallel.layers_per_stage

// Drops the newline after R"( so that line 1 is the first line of the text.
std::string yaml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return std::string(text);
}

// GPT-3 XL (1.3B, Brown et al. 2020): 24 layers, h = 2048, s = 2048, on one
// 8-GPU A100 node as p = 4, d = 2. Line 16 is `layers_per_stage`, when
// appended; its value starts at column 21.
constexpr std::string_view kGpt13b = R"(
model:
  layers: 24
  hidden: 2048
  heads: 16
  seq_len: 2048
  vocab: 51200
hardware:
  preset: a100-80gb
  gpus_per_node: 8
  nodes: 1
training:
  global_batch: 16
parallel:
  pipeline: 4
  data: 2
)";

Result<Config> with_split(std::string_view split) {
  std::string text = yaml(kGpt13b);
  if (!split.empty()) text += "  layers_per_stage: " + std::string(split) + "\n";
  return parse_config(text, "test.yaml");
}

std::string error_of(std::string_view split) {
  Result<Config> config = with_split(split);
  return config.ok() ? "(no error)" : config.error().message;
}

Config config_ok(std::string_view split) {
  Result<Config> config = with_split(split);
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().message);
  return config.ok() ? *config : Config{};
}

CostTable table_ok(const Config& config) {
  Result<CostTable> table = build_cost_table(
      config, interleaved_stage_rank(config.num_stages(), config.parallel.pipeline));
  EXPECT_TRUE(table.ok()) << (table.ok() ? "" : table.error().message);
  return table.ok() ? *table : CostTable{};
}

TEST(PartitionConfig, ReadsExplicitSplit) {
  EXPECT_TRUE(config_ok("").parallel.layers_per_stage.empty());
  EXPECT_EQ(config_ok("[5, 7, 7, 5]").parallel.layers_per_stage, (std::vector<int>{5, 7, 7, 5}));
}

// An empty list is the even split, as no key: the way to undo a config's
// split from the command line (compare's hint for schedules of other stages).
TEST(PartitionConfig, EmptySplitIsTheEvenOne) {
  EXPECT_TRUE(config_ok("[]").parallel.layers_per_stage.empty());
  const Result<Config> undone =
      parse_config(yaml(kGpt13b), "test.yaml",
                   {{"parallel.virtual_stages", "2"}, {"parallel.layers_per_stage", "[]"}});
  ASSERT_TRUE(undone.ok()) << undone.error().message;
  EXPECT_TRUE(undone->parallel.layers_per_stage.empty());
  EXPECT_EQ(table_ok(*undone).stages.size(), 8u);
}

TEST(PartitionConfig, RejectsSplitsThatDoNotFit) {
  EXPECT_EQ(error_of("[6, 6, 6]"),
            "test.yaml:16:21: parallel.layers_per_stage: expected 4 entries, one per stage "
            "(pipeline x virtual_stages), got \"[6, 6, 6]\"");
  EXPECT_EQ(error_of("[6, 6, 6, 5]"),
            "test.yaml:16:21: parallel.layers_per_stage: expected entries summing to "
            "model.layers (24), got \"[6, 6, 6, 5]\"");
  EXPECT_EQ(
      error_of("[6, -1, 13, 6]"),
      "test.yaml:16:25: parallel.layers_per_stage[1]: expected an integer from 0 to 16384, got "
      "\"-1\"");
  EXPECT_EQ(
      error_of("[6, six, 12, 6]"),
      "test.yaml:16:25: parallel.layers_per_stage[1]: expected an integer from 0 to 16384, got "
      "\"six\"");
  EXPECT_EQ(error_of("24"),
            "test.yaml:16:21: parallel.layers_per_stage: expected a list of integers >= 0, "
            "the layers of each stage (pipeline x virtual_stages of them), got \"24\"");
  EXPECT_EQ(error_of("[6, 0, 12, 6]"), "(no error)");  // an empty stage
  // With virtual stages the list has p * v entries.
  Result<Config> config = parse_config(yaml(kGpt13b), "test.yaml",
                                       {{"parallel.virtual_stages", "2"},
                                        {"parallel.layers_per_stage", "[3, 3, 3, 3, 3, 3, 3, 3]"}});
  EXPECT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(error_of("[6, 6, 6, 6]"), "(no error)");
  config = parse_config(
      yaml(kGpt13b), "test.yaml",
      {{"parallel.virtual_stages", "2"}, {"parallel.layers_per_stage", "[6, 6, 6, 6]"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            "--set parallel.layers_per_stage=[6, 6, 6, 6]: parallel.layers_per_stage: expected 8 "
            "entries, one per stage (pipeline x virtual_stages), got \"[6, 6, 6, 6]\"");
}

TEST(PartitionConfig, NeedsAModel) {
  const std::string ideal = yaml(R"(
parallel:
  pipeline: 2
  layers_per_stage: [1, 1]
training:
  global_batch: 4
costs:
  fixed:
    forward_s: 1.0
    backward_s: 2.0
)");
  Result<Config> config = parse_config(ideal, "test.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            "test.yaml:3:3: parallel.layers_per_stage: only with a model: it splits model.layers");
}

TEST(PartitionConfig, CostTableUsesExplicitSplit) {
  const std::vector<int> layers = {3, 9, 7, 5};
  const Config config = config_ok("[3, 9, 7, 5]");
  const CostTable table = table_ok(config);
  const Config even = config_ok("");
  const CostTable even_table = table_ok(even);
  const ModelSpec& model = *config.model;
  // Activations: a stage keeps its layers' worth, by the per-layer figure.
  const int64_t per_layer =
      layer_activation_bytes(model, 1, config.parallel, config.training.recompute);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(table.stages[s].activation_bytes, layers[s] * per_layer) << s;
    EXPECT_EQ(even_table.stages[s].activation_bytes, 6 * per_layer) << s;
  }
  // The middle stages carry neither embedding nor logits: their times scale
  // with their layers (exactly: a stage's time is a sum of equal layer times
  // in picoseconds), against the even split's 6 layers.
  for (int s : {1, 2}) {
    EXPECT_EQ(table.stages[s].forward * 6, even_table.stages[s].forward * layers[s]) << s;
    EXPECT_EQ(table.stages[s].backward * 6, even_table.stages[s].backward * layers[s]) << s;
  }
  // Static bytes of a middle rank: 18 bytes per parameter of its layers in
  // bf16 (t = 1, ZeRO 0: weights 2, fp32 gradient 4, Adam's state 12).
  EXPECT_EQ(table.static_bytes[1], 18 * 9 * layer_parameters(model));
  EXPECT_EQ(table.static_bytes[2], 18 * 7 * layer_parameters(model));
  // An asynchronous schedule's weight version: the stage's parameters in bf16.
  EXPECT_EQ(table.stage_weight_bytes[2], 2 * 7 * layer_parameters(model));
}

// A stage without layers (Megatron-LM's padding chunk, a no-op layer): the
// first holds the embedding alone, a middle one nothing, the last the head
// alone; and only an explicit split may have fewer layers than stages.
TEST(PartitionConfig, AnEmptyStageHoldsOnlyItsEnds) {
  const CostTable empty_ends = table_ok(config_ok("[0, 12, 12, 0]"));
  const CostTable one_each = table_ok(config_ok("[1, 11, 11, 1]"));
  const CostTable empty_middle = table_ok(config_ok("[8, 0, 8, 8]"));
  // Stage 0 of [1, 11, 11, 1] is the embedding and one layer; one layer's
  // time is an 8-layer middle stage's over 8, exactly (a stage's time is a
  // sum of equal layer times in picoseconds).
  const Picos layer = empty_middle.stages[2].forward / 8;
  ASSERT_EQ(empty_middle.stages[2].forward, 8 * layer);
  EXPECT_EQ(empty_ends.stages[0].forward, one_each.stages[0].forward - layer);
  EXPECT_GT(empty_ends.stages[0].forward, 0);  // the embedding
  EXPECT_GT(empty_ends.stages[3].forward, 0);  // the logits and loss
  EXPECT_EQ(empty_middle.stages[1].forward, 0);
  EXPECT_EQ(empty_middle.stages[1].backward, 0);
  EXPECT_EQ(empty_middle.stages[1].activation_bytes, 0);
  EXPECT_EQ(empty_middle.static_bytes[1], 0);  // rank 1 holds stage 1 alone: no weights
  // Its neighbours still hand their activations across it.
  EXPECT_GT(empty_middle.p2p_forward[0], 0);
  EXPECT_GT(empty_middle.p2p_forward[1], 0);

  Result<Config> fewer_layers_than_stages =
      parse_config(yaml(kGpt13b), "test.yaml",
                   {{"parallel.virtual_stages", "7"},
                    {"parallel.layers_per_stage",
                     "[0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1"
                     ", 1, 0, 0, 0]"}});
  EXPECT_TRUE(fewer_layers_than_stages.ok()) << fewer_layers_than_stages.error().message;
  Result<Config> no_split =
      parse_config(yaml(kGpt13b), "test.yaml", {{"parallel.virtual_stages", "7"}});
  ASSERT_FALSE(no_split.ok());
  EXPECT_THAT(no_split.error().message,
              ::testing::HasSubstr("parallel.layers_per_stage may leave stages empty"));
}

TEST(PartitionConfig, CostTableRejectsABadSplitMadeInCode) {
  Config config = config_ok("");
  config.parallel.layers_per_stage = {6, 6, 6, 5};
  Result<CostTable> table = build_cost_table(config, interleaved_stage_rank(4, 4));
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().message,
            "test.yaml: parallel.layers_per_stage sums to 23 layers, but model.layers = 24");
  config.parallel.layers_per_stage = {12, 12};
  table = build_cost_table(config, interleaved_stage_rank(4, 4));
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().message,
            "test.yaml: parallel.layers_per_stage has 2 entries; it needs one per stage, p * v = "
            "4");
}

// ---------------------------------------------------------- balanced_layers

// The slowest stage's forward + backward in the cost table of `split`.
Picos table_bottleneck(Config config, const std::vector<int>& split) {
  config.parallel.layers_per_stage = split;
  const CostTable table = table_ok(config);
  Picos worst = 0;
  for (const StageCost& stage : table.stages) {
    worst = std::max(worst, stage.forward + stage.backward);
  }
  return worst;
}

TEST(PartitionBalanced, Gpt13bIsTheFastestSplitOfTheCostTable) {
  const Config config = config_ok("");
  Result<std::vector<int>> balanced = balanced_layers(config);
  ASSERT_TRUE(balanced.ok()) << balanced.error().message;
  const std::vector<int>& split = *balanced;
  ASSERT_EQ(split.size(), 4u);
  EXPECT_EQ(sum(split), 24);
  // The logits (2 s h V = 0.43 TFLOP per sequence against 0.24 per layer;
  // 1.3 layers in time) outweigh a layer: the last stage takes fewer layers
  // than the middle ones.
  EXPECT_LT(split[3], split[1]);
  EXPECT_LT(split[3], split[2]);
  // By hand, with a layer 4.44 ms and the logits 5.80 ms: some stage takes 7
  // layers (31.1 ms); the last can take 5 within that (28.0 ms; 6 is
  // 32.5 ms), and the first three share 19: {6, 6, 7} is the most even, in
  // its first ordering.
  EXPECT_EQ(split, (std::vector<int>{6, 6, 7, 5}));
  // Independent of piece_times: every one of the C(23, 3) = 1771 splits timed
  // by build_cost_table; none has a faster slowest stage.
  Picos fastest = std::numeric_limits<Picos>::max();
  std::vector<int> prefix;
  compositions(
      24, 4,
      [&](const std::vector<int>& s) { fastest = std::min(fastest, table_bottleneck(config, s)); },
      prefix);
  EXPECT_EQ(table_bottleneck(config, split), fastest);
  EXPECT_LT(fastest, table_bottleneck(config, {6, 6, 6, 6}));
}

TEST(PartitionBalanced, Gpt13bOnEightStages) {
  Config config = config_ok("");
  config.parallel.pipeline = 8;
  config.parallel.data = 1;
  Result<std::vector<int>> balanced = balanced_layers(config);
  ASSERT_TRUE(balanced.ok()) << balanced.error().message;
  const std::vector<int>& split = *balanced;
  ASSERT_EQ(split.size(), 8u);
  EXPECT_EQ(sum(split), 24);
  // Some stage must take 4 (3 each plus the logits' 1.3 layers on the last is
  // slower), and the logits' stage can take 2 within that: 3 + 3 x 6 + 4 + 2.
  EXPECT_EQ(split, (std::vector<int>{3, 3, 3, 3, 3, 3, 4, 2}));
  EXPECT_LT(table_bottleneck(config, split), table_bottleneck(config, std::vector<int>(8, 3)));
}

TEST(PartitionBalanced, PieceTimesAddUpToTheStageTimes) {
  Config config = config_ok("");
  config.parallel.tensor = 2;
  config.parallel.data = 1;
  Result<PieceTimes> times = piece_times(config);
  ASSERT_TRUE(times.ok()) << times.error().message;
  const CostTable table = table_ok(config);
  auto seconds = [&](int s) {
    return picos_to_seconds(table.stages[s].forward + table.stages[s].backward);
  };
  // Up to rounding to picoseconds per piece.
  EXPECT_NEAR(seconds(0), 6 * times->layer_s + times->embedding_s, 1e-11);
  EXPECT_NEAR(seconds(1), 6 * times->layer_s, 1e-11);
  EXPECT_NEAR(seconds(3), 6 * times->layer_s + times->logits_s, 1e-11);
  EXPECT_GT(times->logits_s, times->layer_s);
  EXPECT_GT(times->layer_s, times->embedding_s);
}

TEST(PartitionBalanced, WithoutHardwareTheEvenSplit) {
  Config config = config_ok("");
  config.hardware.reset();
  Result<std::vector<int>> split = balanced_layers(config);
  ASSERT_TRUE(split.ok()) << split.error().message;
  EXPECT_EQ(*split, std::vector<int>(4, 6));
}

TEST(PartitionBalanced, Errors) {
  Config config = config_ok("");
  config.model.reset();
  Result<std::vector<int>> split = balanced_layers(config);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.error().message,
            "test.yaml: balancing the layer split needs a model: there are no layers to split");
  config = config_ok("");
  config.parallel.pipeline = 32;
  split = balanced_layers(config);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.error().message,
            "test.yaml: model.layers (24) is fewer than the pipeline stages p * v (32); every "
            "stage needs at least one layer");
  config = config_ok("");
  config.hardware->hbm_bandwidth_gbps = 0;
  split = balanced_layers(config);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.error().message,
            "test.yaml: hardware.hbm_bandwidth_gbps must be positive for the analytic cost model, "
            "got 0.000000");
}

}  // namespace
}  // namespace partition_test
}  // namespace ppsim
