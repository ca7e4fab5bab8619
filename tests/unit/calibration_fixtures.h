// Shared by the calibration tests: a hand-written cost profile of one block
// shape, and a folder of its own per test (ctest runs tests in parallel).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ppsim::calibration_test {

// A version-2 profile's `kernels:` of one block shape (micro_batch 1,
// context 0, tensor 1), each kind timed at exactly its median.
inline std::string block_kernels(int tokens, int hidden, int ffn, int heads,
                                 const std::vector<std::pair<const char*, double>>& medians) {
  std::string text = "version: 2\nkernels:\n";
  for (const auto& [kind, t] : medians) {
    text += fmt::format(
        "  - {{kind: {}, micro_batch: 1, tokens: {}, context: 0, hidden: {}, ffn: {}, "
        "heads: {}, tensor: 1, median_s: {}, min_s: {}, max_s: {}, repetitions: 1}}\n",
        kind, tokens, hidden, ffn, heads, t, t, t);
  }
  return text;
}

// A fresh folder named after the running test, removed afterwards.
class TestFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("ppsim_{}_{}_{}", info->test_suite_name(), info->name(), getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

}  // namespace ppsim::calibration_test
