// Small helpers for the readers that walk YAML by hand (configs, cost
// profiles): internal to sim/, never included by a header others see.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/status.h"

namespace ppsim::yaml_util {

// A node as the user wrote it, for "got ..." in messages: a scalar's text, a
// list or map in flow style.
inline std::string render(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

// The one YAML document of a file's text: invalid YAML, and a second
// document (which would be silently ignored), are errors naming
// source:line:column. An empty text is a null node.
inline Result<YAML::Node> load_document(const std::string& text, std::string_view source) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    return Error{fmt::format("{}:{}:{}: invalid YAML: {}", source, e.mark.line + 1,
                             e.mark.column + 1, e.msg)};
  } catch (const std::exception& e) {  // yaml-cpp's own, or allocation: never a crash
    return Error{fmt::format("{}: {}", source, e.what())};
  }
  if (documents.size() > 1) {
    const YAML::Mark mark = documents[1].Mark();
    return Error{fmt::format(
        "{}:{}:{}: a second YAML document: a file holds one (remove the '---' before it)", source,
        mark.line + 1, mark.column + 1)};
  }
  return documents.empty() ? YAML::Node() : documents[0];
}

}  // namespace ppsim::yaml_util
