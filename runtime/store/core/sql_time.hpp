// store/core/sql_time — INTERNAL to store/: the one SQL time helper (docs/how-it-works.md#clocks).
// Owns how time crosses into and out of SQL (no statement spells to_timestamp, extract(epoch ...)
// or an interval literal itself):
//  - every expiry and due time (range lease, row lease, can_run_after, worker lease, host
//    heartbeat) and every "has it expired?" comparison uses the DATABASE's clock: the host
//    passes a duration in milliseconds (ms_param) and the SQL adds it to kDbNow (db_in). Hosts
//    with skewed wall clocks then agree on every lease; a host keeps its own deadlines (when to
//    renew, when a lease is too short to start a handler) on its steady clock;
//  - an instant of the host's wall clock is passed only where it is a record or an operator's
//    input (a host's start time, an audit row's decision time, `--to-time`, the janitor's
//    retention cutoffs): epoch_ms_param + from_epoch_ms.
// Threading: pure functions.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.hpp"
#include "common/duration.hpp"

namespace sqlstreams::store {

// The database clock when the current statement started: stable within a statement (one value
// for every row, usable in an index condition), fresher than now() in a multi-statement
// transaction (a claim that waited for a row lock gets its full lease).
inline constexpr const char* kDbNow = "statement_timestamp()";

// A duration as a parameter: milliseconds, bound as text and used through db_in / db_ago.
inline std::string ms_param(Millis d) { return std::to_string(d.count()); }
// An optional duration: nullopt binds as NULL (through pq.hpp nullable()).
inline std::optional<std::string> ms_param(const std::optional<Millis>& d) {
  if (!d) return std::nullopt;
  return ms_param(*d);
}

// "(($3)::bigint * interval '1 millisecond')": a ms_param duration (or a bigint SQL
// expression of milliseconds) as an interval; NULL stays NULL.
inline std::string ms_interval(std::string_view expr) {
  return fmt::format("(({})::bigint * interval '1 millisecond')", expr);
}
// "(statement_timestamp() + (($3)::bigint * interval '1 millisecond'))": database now + a
// ms_param duration.
inline std::string db_in(std::string_view placeholder) {
  return fmt::format("({} + {})", kDbNow, ms_interval(placeholder));
}
// Database now - a ms_param duration.
inline std::string db_ago(std::string_view placeholder) {
  return fmt::format("({} - {})", kDbNow, ms_interval(placeholder));
}

// A host wall-clock instant (a record, or an operator's input) as epoch milliseconds text,
// used through from_epoch_ms.
inline std::string epoch_ms_param(SysTime t) {
  return std::to_string(t.time_since_epoch().count());
}
// "to_timestamp(($2)::bigint / 1000.0)" for a placeholder or a bigint SQL expression.
inline std::string from_epoch_ms(std::string_view expr) {
  return fmt::format("to_timestamp(({})::bigint / 1000.0)", expr);
}
// "(extract(epoch FROM x) * 1000)::bigint": a timestamptz expression as epoch milliseconds,
// or an interval expression as milliseconds (read back with time_from_epoch_ms / Millis).
inline std::string to_epoch_ms(std::string_view expr) {
  return fmt::format("(extract(epoch FROM {}) * 1000)::bigint", expr);
}
// The host side of to_epoch_ms for an instant.
inline SysTime time_from_epoch_ms(int64_t ms) { return SysTime(Millis(ms)); }

}  // namespace sqlstreams::store
