// The one way ppsim reads a file a user names (a config, a preset, a
// schedule CSV, a profile, a runs file): the whole text, or an error that
// names the file and why it cannot be read (the system's reason; a folder or
// a device instead of a file; a size past what such a file can be).
#pragma once

#include <cstdint>
#include <string>

#include "schedules/status.h"

namespace ppsim {

// YAML configs and presets are a few KiB; yaml-cpp needs about 250 bytes of
// memory per byte of a list, so a cap keeps a wrong file from taking GiBs.
inline constexpr int64_t kMaxYamlFileBytes = int64_t{1} << 20;
// Schedules, profiles and runs files: far above the largest one ppsim
// writes (schedules/limits.h's cap at a few bytes per action).
inline constexpr int64_t kMaxDataFileBytes = int64_t{1} << 30;

// Why `path` is not a file one can read (the system's reason, or that it is
// a folder or a device), or "" when it is one.
std::string why_not_readable(const std::string& path);
Result<std::string> read_text_file(const std::string& path, int64_t max_bytes);

}  // namespace ppsim
