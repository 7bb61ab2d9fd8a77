// store/core/sql_array — INTERNAL: PostgreSQL array literals for bulk parameters ($1::bigint[]
// ...), since libpqxx 6.4 cannot bind containers; and the binary wire format of a jsonb[] parameter
// (the producer's payload transport: no escaping, exact lengths, each element parsed on its own).
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sqlstreams::store {

std::string int_array(const std::vector<int64_t>& values);
// Quoted elements ("..." with \ and " escaped); nullopt becomes NULL.
std::string text_array(const std::vector<std::optional<std::string>>& values);
std::string text_array(const std::vector<std::string>& values);

// A one-dimensional jsonb[] in PostgreSQL's binary array format (array_recv: ndim, flags,
// element type oid 3802, length, lower bound 1; per element its length and jsonb_recv's
// version byte 1 followed by the JSON text). Bind it as a binary parameter ($1::jsonb[]): the
// server parses each element as jsonb_in would (same strictness: UTF-8, no NUL, valid JSON).
std::string jsonb_binary_array(const std::vector<std::string_view>& values);

}  // namespace sqlstreams::store
