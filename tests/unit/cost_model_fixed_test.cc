// costs.fixed: times and bytes given in the config instead of, or over,
// the analytic model's, and the checks on them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "sim/cost/cost_model.h"
#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace cost_model_fixed_test {
namespace {

using ::testing::HasSubstr;

using namespace cost_model_test;  // NOLINT: the fixtures of this file

TEST(Fixed, ScalarsAndPerStageWithoutAModel) {
  Config c = make_config(std::nullopt, 2, 1, 1);
  c.fixed.forward_s = {1.0};
  c.fixed.backward_s = {2.0, 3.0};
  c.fixed.weight_grad_s = {0.5};
  c.fixed.p2p_s = {0.25};
  c.fixed.activation_bytes = {1e9};
  const CostTable table = build_ok(c);
  ASSERT_EQ(table.num_stages(), 2);
  EXPECT_EQ(table.stages[0].forward, 1'000'000'000'000);
  EXPECT_EQ(table.stages[1].forward, 1'000'000'000'000);
  EXPECT_EQ(table.stages[0].backward, 2'000'000'000'000);
  EXPECT_EQ(table.stages[1].backward, 3'000'000'000'000);
  EXPECT_EQ(table.stages[1].weight_grad, 500'000'000'000);
  EXPECT_EQ(table.stages[1].activation_bytes, 1'000'000'000);
  EXPECT_EQ(table.p2p_forward, (std::vector<Picos>{250'000'000'000}));
  EXPECT_EQ(table.p2p_backward, table.p2p_forward);
  // Nothing else is known without a model.
  EXPECT_EQ(table.p2p_bytes, (std::vector<int64_t>{0}));
  EXPECT_EQ(table.static_bytes, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(table.grad_sync, (std::vector<Picos>{0, 0}));
  EXPECT_EQ(table.optimizer_step, (std::vector<Picos>{0, 0}));
}

TEST(Fixed, PerStageP2pUsesTheSendingStagesEntry) {
  Config c = make_config(std::nullopt, 3, 1, 1);
  c.fixed.forward_s = {1.0};
  c.fixed.backward_s = {1.0};
  c.fixed.p2p_s = {0.1, 0.2, 0.3};
  EXPECT_EQ(build_ok(c).p2p_forward, (std::vector<Picos>{100'000'000'000, 200'000'000'000}));
}

TEST(Fixed, OverridesOnlyWhatItGives) {
  Config c = gpt3_three_stages(Recompute::kNone);
  const CostTable analytic = build_ok(c);
  c.fixed.forward_s = {0.5};
  const CostTable mixed = build_ok(c);
  EXPECT_EQ(mixed.stages[1].forward, 500'000'000'000);
  EXPECT_EQ(mixed.stages[1].backward, analytic.stages[1].backward);
  EXPECT_EQ(mixed.static_bytes, analytic.static_bytes);
  // A fixed backward shorter than the analytic W caps W.
  c.fixed.backward_s = {1e-9};
  EXPECT_EQ(build_ok(c).stages[1].weight_grad, 1000);
}

TEST(Fixed, BadListsAreErrors) {
  Config c = make_config(std::nullopt, 2, 1, 1);
  c.fixed.forward_s = {1.0, 2.0, 3.0};
  Result<CostTable> wrong_size =
      build_cost_table(c, interleaved_stage_rank(c.num_stages(), c.parallel.pipeline));
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_THAT(wrong_size.error().message, HasSubstr("costs.fixed.forward_s has 3 values"));

  c.fixed.forward_s = {-1.0};
  Result<CostTable> negative =
      build_cost_table(c, interleaved_stage_rank(c.num_stages(), c.parallel.pipeline));
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.error().message,
              HasSubstr("costs.fixed.forward_s must be finite and not negative, got -1"));

  c.fixed.forward_s = {1.0};
  c.fixed.backward_s = {1.0};
  c.fixed.weight_grad_s = {2.0};
  Result<CostTable> over =
      build_cost_table(c, interleaved_stage_rank(c.num_stages(), c.parallel.pipeline));
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.error().message, HasSubstr("costs.fixed.weight_grad_s exceeds backward_s"));

  // The communication an overlapped pair may hide is part of its time.
  c.fixed.weight_grad_s = {0.25};
  c.fixed.forward_comm_s = {1.5};
  Result<CostTable> comm = build_cost_table(c, {0, 1});
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(comm.error().message, HasSubstr("costs.fixed.forward_comm_s exceeds forward_s"));
  c.fixed.forward_comm_s = {0.5};
  c.fixed.backward_comm_s = {0.8};  // more than B - W = 0.75
  comm = build_cost_table(c, {0, 1});
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(comm.error().message,
              HasSubstr("costs.fixed.backward_comm_s exceeds backward_s less weight_grad_s"));
  c.fixed.backward_comm_s = {0.75};
  comm = build_cost_table(c, {0, 1});
  ASSERT_TRUE(comm.ok()) << comm.error().message;
  EXPECT_EQ(comm->stages[1].forward_comm, 500'000'000'000);
  EXPECT_EQ(comm->stages[1].backward_comm, 750'000'000'000);
}

// The analytic model's communication: a tensor-parallel layer's collectives
// are part of its forward and input gradient, and capped under a fixed,
// shorter time.
TEST(Fixed, AnalyticCommunicationStaysWithinAFixedTime) {
  Config c = gpt3_three_stages(Recompute::kNone);
  c.parallel.tensor = 8;
  const std::vector<int> stage_rank = interleaved_stage_rank(c.num_stages(), c.parallel.pipeline);
  const Result<CostTable> analytic = build_cost_table(c, stage_rank);
  ASSERT_TRUE(analytic.ok()) << analytic.error().message;
  const StageCost& middle = analytic->stages[1];
  EXPECT_GT(middle.forward_comm, 0);
  EXPECT_LT(middle.forward_comm, middle.forward);
  EXPECT_GT(middle.backward_comm, 0);
  EXPECT_LT(middle.backward_comm, middle.backward - middle.weight_grad);
  c.fixed.forward_s = {1e-9};
  const Result<CostTable> fixed = build_cost_table(c, stage_rank);
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  EXPECT_EQ(fixed->stages[1].forward_comm, 1000);
}

}  // namespace
}  // namespace cost_model_fixed_test
}  // namespace ppsim
