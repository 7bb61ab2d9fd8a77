// store/reporting/operator_actions — what operators do to a group by hand
// (docs/design.md#retries-exception-rows-and-dead-letters): list, inspect, retry (fresh budget) and
// discard dead letters (and discard kept messages), and rewind a group to re-deliver history. Every
// action writes an audit row (deliveries_N, outcome "operator-…", host = the actor). Dead letters
// keep their payload, so `retry` works after retention dropped the message. Threading: uses the
// caller's Session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "store/connection/session.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::store {

// Every list/retry/discard validates its filter: a negative id, an empty error text, a
// negative age or a limit < 1 throws StoreError kRejected (never "no filter").
struct DeadFilter {
  std::optional<std::string> error_contains;  // literal case-insensitive substring (no wildcards)
  std::optional<int64_t> from_id;             // inclusive
  std::optional<int64_t> to_id;               // inclusive
  std::optional<Millis> older_than;           // died at least this long ago (database clock)
  int32_t limit = 1000;
  // list_dead, discard_dead: the rows kept for a schema version the group does not accept
  // (status `parked`, docs/tutorial.md#versions-a-group-does-not-accept-yet) instead of dead
  // letters.
  // A kept row runs once the group accepts its version; discard_dead deletes it for good (an
  // operator's explicit choice, audited); retry_dead refuses it.
  bool kept = false;
};

struct DeadLetter {
  int64_t message_id = 0;
  int32_t attempts = 0;
  std::string last_error;
  int64_t died_at_unix_ms = 0;
  std::optional<std::string> payload;  // whole, or its first Preview::payload_chars characters
  int64_t payload_bytes = 0;           // the whole payload's size as text
  bool message_retained = false;       // the log still has the message
  bool truncated() const {
    return payload && static_cast<int64_t>(payload->size()) < payload_bytes;
  }
};

// Byte budgets for views that show many dead letters at once (the host's dead-letter page,
// docs/operating/service.md#http): only a prefix of each payload and error crosses from the
// database, and only the newest history rows. 0 = whole / every row (the CLI's `dead show`).
struct Preview {
  int32_t payload_chars = 0;
  int32_t error_chars = 0;
  int32_t history_rows = 0;
};

struct DeliveryRecord {
  int32_t attempt = 0;
  std::string outcome;
  std::string error;
  std::string host;
  int64_t at_unix_ms = 0;
};

std::vector<DeadLetter> list_dead(Session& session, const GroupRef& group, const DeadFilter& filter,
                                  const Preview& preview = {});
std::optional<DeadLetter> find_dead(Session& session, const GroupRef& group, int64_t message_id,
                                    bool kept = false);
// Oldest first; with preview.history_rows, only that many of the newest.
std::vector<DeliveryRecord> delivery_history(Session& session, const GroupRef& group,
                                             int64_t message_id, const Preview& preview = {});

// Back to `ready` (due at once, database clock) with a fresh budget; returns the message ids
// sent back. Only rows still `dead` when the statement changes them are touched (a concurrent
// claim wins).
std::vector<int64_t> retry_dead(Session& session, const GroupRef& group, const DeadFilter& filter,
                                const std::string& actor);
// Deletes the dead letters the filter names (filter.kept: the kept rows, V013 kept_discard);
// returns their ids. Only rows still of that status when the statement deletes them go (a row
// a host is running has left it), each with a deliveries_N audit row "operator-discard".
std::vector<int64_t> discard_dead(Session& session, const GroupRef& group, const DeadFilter& filter,
                                  const std::string& actor);
// The status of the group's exception row for a message ("dead", "parked", "ready", ...), or
// nullopt when it has none: what an operator's --id named when nothing matched.
std::optional<std::string> exception_status(Session& session, const GroupRef& group,
                                            int64_t message_id);

struct RewindResult {
  int64_t claimed_before = 0;
  int64_t committed_before = 0;
  int64_t position = 0;  // messages with id > position are delivered again
};

// Moves the group's cursor back so that every message with id > position is delivered again.
// `to_time` picks the position just before the first message created at or after it.
// Safe while hosts run: claims in flight finish normally; new claims start at `position`; the
// cursor generation is bumped so an advancer that read its target before cannot skip ahead.
// A negative `to_id` is refused (StoreError kRejected).
RewindResult rewind_group(Session& session, const GroupRef& group, std::optional<int64_t> to_id,
                          std::optional<SysTime> to_time, const std::string& actor);

}  // namespace sqlstreams::store
