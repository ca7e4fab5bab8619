#include "schedules/action.h"

#include <fmt/format.h>

#include <charconv>

#include "schedules/limits.h"

namespace ppsim {

char action_kind_letter(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return 'F';
    case ActionKind::kBackward:
      return 'B';
    case ActionKind::kBackwardInput:
      return 'I';
    case ActionKind::kBackwardWeight:
      return 'W';
    case ActionKind::kStep:
      return 'S';
  }
  return '?';
}

std::string to_string(const Action& action) {
  if (action.slice != 0) {
    return fmt::format("{}{}{}s{}", action.stage, action_kind_letter(action.kind),
                       action.microbatch, action.slice);
  }
  return fmt::format("{}{}{}", action.stage, action_kind_letter(action.kind), action.microbatch);
}

namespace {

bool parse_index(std::string_view text, int32_t* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && *out >= 0;
}

// An index past its cap (schedules/limits.h) names the cap; an action's
// indices are below the sizes they count.
Status check_index(std::string_view what, int32_t index, int64_t cap) {
  if (index < cap) return {};
  return Error{fmt::format("{} {} is past the largest ppsim simulates ({})", what, index, cap - 1)};
}

}  // namespace

Result<Action> parse_action(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  const size_t pos = text.find_first_of("FBIWS");
  const size_t s = pos == std::string_view::npos ? pos : text.find('s', pos + 1);
  Action action;
  if (pos == std::string_view::npos || !parse_index(text.substr(0, pos), &action.stage) ||
      !parse_index(text.substr(pos + 1, s == std::string_view::npos ? s : s - pos - 1),
                   &action.microbatch) ||
      (s != std::string_view::npos && !parse_index(text.substr(s + 1), &action.slice))) {
    return Error{fmt::format(
        "\"{}\" is not an action: expected STAGE KIND MICROBATCH with KIND one of F, B, I, W, S "
        "(e.g. \"2F0\"), and sSLICE for a token slice (\"2F0s3\")",
        printable(text))};
  }
  for (const Status& index : {check_index("stage", action.stage, kMaxStages),
                              check_index("microbatch", action.microbatch, kMaxMicrobatches),
                              check_index("slice", action.slice, kMaxSlices)}) {
    if (!index) return Error{fmt::format("\"{}\": {}", printable(text), index.message())};
  }
  switch (text[pos]) {
    case 'F':
      action.kind = ActionKind::kForward;
      break;
    case 'B':
      action.kind = ActionKind::kBackward;
      break;
    case 'I':
      action.kind = ActionKind::kBackwardInput;
      break;
    case 'W':
      action.kind = ActionKind::kBackwardWeight;
      break;
    default:
      action.kind = ActionKind::kStep;
      break;
  }
  return action;
}

}  // namespace ppsim
