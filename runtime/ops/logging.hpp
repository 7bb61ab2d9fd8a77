// ops/logging — process-wide log set-up (spdlog). Human-readable on a terminal, one JSON
// object per line otherwise (or as configured). Events use stable names as the first word of
// the message (`dead-lettered`, `lease-reclaimed`, `range-quarantined`, ...). Never log
// payloads or passwords (mask URLs with common/url.hpp).
// Threading: call setup_logging() once from main before starting threads.
#pragma once

#include <string>

#include "config/config.hpp"

namespace sqlstreams::ops {

void setup_logging(const std::string& level, config::LogFormat format);

}  // namespace sqlstreams::ops
