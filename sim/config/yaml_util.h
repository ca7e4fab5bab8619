// Small helpers for the readers that walk YAML by hand (configs, cost
// profiles): internal to sim/, never included by a header others see.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

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

}  // namespace ppsim::yaml_util
