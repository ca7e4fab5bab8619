#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/cli/options.h"

namespace ppsim::cli {
namespace cli_options_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A kilobyte fits any machine; an exabyte (10^18 bytes) none that ppsim runs
// on: the error names what, the two sizes in GiB.
TEST(CheckMemory, SaysWhatOutgrowsTheMachine) {
  EXPECT_TRUE(check_memory(1024, "a kilobyte").ok());
  const Status too_big = check_memory(1e18, "the weights");
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(too_big.message(), StartsWith("the weights take 931322574.6 GiB, more than this "
                                            "machine's "));
  EXPECT_THAT(too_big.message(), HasSubstr(" GiB of memory"));
}

// Each file a command will write is checked with the flag that names it;
// the first that cannot be written is the error.
TEST(CheckOutputs, NamesTheFlagOfAPathThatCannotBeWritten) {
  const std::string ok = ::testing::TempDir() + "/out.json";
  const std::string missing = "no-such-dir/out.csv";
  const std::string stdout_path = "-";
  EXPECT_TRUE(check_outputs({{"--json", ok}, {"--csv", stdout_path}}).ok());
  const Status bad = check_outputs({{"--json", ok}, {"--csv", missing}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), StartsWith("--csv: cannot write no-such-dir/out.csv: "));
}

}  // namespace
}  // namespace cli_options_test
}  // namespace ppsim::cli
