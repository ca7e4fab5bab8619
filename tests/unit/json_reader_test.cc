// The JSON walker of runs files (sim/fit/json_reader.h): each error names
// where its value or key starts, counted by hand from the texts below.
#include "sim/fit/json_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace ppsim::json_reader {
namespace json_reader_test {
namespace {

// Reads {"a": <int >= 0>, "b": [<numbers >= 0>...]} and returns a + sum(b).
Result<double> read_ab(const std::string& text) {
  return read_json<double>(text, "t.json", [](const Walker& walk) {
    const Map m = walk.map(walk.root(), {"a", "b"});
    double sum = walk.to_int(walk.required(m, "a"), 0);
    for (const Value& element : walk.list(m.get("b"))) sum += walk.to_number(element);
    return sum;
  });
}

std::string error_of(const std::string& text) {
  const Result<double> result = read_ab(text);
  return result.ok() ? "(no error)" : result.error().message;
}

TEST(JsonReader, ReadsWhatItChecks) {
  const Result<double> result = read_ab("{\"a\": 2, \"b\": [0.5, 1e1]}");
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_DOUBLE_EQ(*result, 12.5);
}

TEST(JsonReader, AValueErrorPointsAtTheValue) {
  // Line 2, the "-1" starts at column 12: two spaces, "b": [3, then -1.
  EXPECT_EQ(error_of("{\"a\": 1,\n  \"b\": [3, -1]}"),
            "t.json:2:12: b[1]: expected a number >= 0, got \"-1\"");
  EXPECT_EQ(error_of("{\"a\": \"7\"}"), "t.json:1:7: a: expected an integer >= 0, got \"7\"");
  EXPECT_EQ(error_of("{\"a\": 1, \"b\": {}}"), "t.json:1:15: b: expected an array, got \"{}\"");
}

TEST(JsonReader, AKeyErrorPointsAtTheKey) {
  EXPECT_EQ(error_of("{\"a\": 1,\n \"c\": 2}"), "t.json:2:2: c: unknown key, expected one of a, b");
  EXPECT_EQ(error_of("{\"a\": 1, \"a\": 2}"), "t.json:1:10: a: duplicate key");
  // A null value has no place of its own: its key's.
  EXPECT_EQ(error_of("{\"a\": null}"), "t.json:1:2: a: expected an integer >= 0, got nothing");
}

TEST(JsonReader, AMissingKeyPointsAtItsObject) {
  EXPECT_EQ(error_of("\n  {\"b\": []}"), "t.json:2:3: a: missing");
}

TEST(JsonReader, SyntaxErrorsNameTheirPlace) {
  // nlohmann-json reads up to the 'x' of line 2, column 7, and stops there.
  EXPECT_THAT(error_of("{\"a\": 1,\n \"b\": x}"), testing::StartsWith("t.json:2:7: syntax error"));
  EXPECT_THAT(error_of(""), testing::StartsWith("t.json:1:1: syntax error"));
  EXPECT_THAT(error_of("{\"a\": 1} 2"), testing::StartsWith("t.json:1:10: syntax error"));
}

TEST(JsonReader, NestingHasALimit) {
  const std::string deep =
      std::string(Document::kMaxDepth + 1, '[') + std::string(Document::kMaxDepth + 1, ']');
  // The (kMaxDepth + 1)-th '[' is where it stops.
  EXPECT_EQ(error_of(deep), fmt::format("t.json:1:{}: nested deeper than {} levels",
                                        Document::kMaxDepth + 1, Document::kMaxDepth));
  const std::string fits =
      std::string(Document::kMaxDepth, '[') + std::string(Document::kMaxDepth, ']');
  EXPECT_EQ(error_of(fits), "t.json:1:1: expected an object with keys a, b, got \"" +
                                Json::parse(fits).dump() + "\"");
}

TEST(JsonReader, AnIntegerOutOfItsTypeIsOutOfRange) {
  const Result<int> read = read_json<int>("{\"n\": 4294967296}", "t.json", [](const Walker& walk) {
    return walk.to_int(walk.required(walk.map(walk.root(), {"n"}), "n"), 0);
  });
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().message, "t.json:1:7: n: expected an integer >= 0, got \"4294967296\"");
}

}  // namespace
}  // namespace json_reader_test
}  // namespace ppsim::json_reader
