// common/url — helpers for database URLs. Owns: masking secrets before anything is printed.
// Threading: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace sqlstreams {

// Replaces the password of a postgres URL ("postgresql://user:secret@host/db") or a
// key=value conninfo ("password=secret") with "***". Anything else is returned unchanged.
std::string mask_url(std::string_view url);

}  // namespace sqlstreams
