// A minimal streaming JSON writer for summaries and traces: it tracks commas
// and escapes strings, nothing more. Non-finite numbers become null.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ppsim {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  JsonWriter& value(double v);
  JsonWriter& value(int64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(bool v);
  JsonWriter& value(std::optional<double> v);
  JsonWriter& null();
  // key(k).value(v)
  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) {
    return key(k).value(v);
  }

 private:
  void separate();
  std::string* out_;
  bool need_comma_ = false;
};

}  // namespace ppsim
