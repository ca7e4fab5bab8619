// Small helpers for the readers that walk YAML by hand (configs, cost
// profiles): internal to sim/, never included by a header others see.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <exception>
#include <sstream>
#include <string>
#include <string_view>

#include "schedules/status.h"

namespace ppsim::yaml_util {

// A node as the user wrote it, for "got ..." in messages: a scalar's text, a
// list or map in flow style; control bytes escaped (printable()).
inline std::string render(const YAML::Node& node) {
  if (node.IsScalar()) return printable(node.Scalar());
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << node;
  return printable(out.c_str());
}

// Counts the documents a parser walks and keeps where the second starts.
class DocumentStarts : public YAML::EventHandler {
 public:
  int count = 0;
  YAML::Mark second;

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++count == 2) second = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The one YAML document of a file's text: invalid YAML, and anything after
// the first document (a second one, or text yaml-cpp's Load would silently
// drop), are errors naming source:line:column. An empty text is a null node.
// (yaml-cpp's LoadAll is not used: it loops forever on some text after a
// first document; the parser here is asked for two documents at most.)
inline Result<YAML::Node> load_document(const std::string& text, std::string_view source) {
  try {
    YAML::Node root = YAML::Load(text);
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts starts;
    if (parser.HandleNextDocument(starts)) parser.HandleNextDocument(starts);
    if (starts.count > 1) {
      return Error{fmt::format(
          "{}:{}:{}: text after the first YAML document: a file holds one document (a second "
          "one after '---', or text past the end of the first)",
          source, starts.second.line + 1, starts.second.column + 1)};
    }
    return root;
  } catch (const YAML::ParserException& e) {
    return Error{fmt::format("{}:{}:{}: invalid YAML: {}", source, e.mark.line + 1,
                             e.mark.column + 1, e.msg)};
  } catch (const std::exception& e) {  // yaml-cpp's own, or allocation: never a crash
    return Error{fmt::format("{}: {}", source, e.what())};
  }
}

}  // namespace ppsim::yaml_util
