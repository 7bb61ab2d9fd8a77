// store/sql_array — INTERNAL: PostgreSQL array literals for bulk parameters ($1::bigint[] ...),
// since libpqxx 6.4 cannot bind containers. Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sqlstreams::store {

std::string int_array(const std::vector<int64_t>& values);
// Quoted elements ("..." with \ and " escaped); nullopt becomes NULL.
std::string text_array(const std::vector<std::optional<std::string>>& values);
std::string text_array(const std::vector<std::string>& values);

}  // namespace sqlstreams::store
