// store/reporting/stream_settings — changing a stream's fleet-wide settings on purpose (V008,
// docs/operating/service.md#fleet-settings). retention, allow_drop_past_committed,
// max_payload_bytes, notify and (V011) idempotency_window hold for every host of the fleet;
// declaring an existing stream never writes them (catalog.hpp), so the only way to change them is
// set_stream_settings() — `sqlstreams stream set` — which runs the SECURITY DEFINER function of the
// same name: the change and its stream_actions row (session role, application, client address, the
// operator's actor text, from and to) commit together.
// Running hosts read retention and allow_drop_past_committed at each janitor pass, SQL producers
// read max_payload_bytes and notify at each call; a running host's own producer and claimer take
// max_payload_bytes and notify at their next start or reload. Every producer reads
// idempotency_window at each keyed produce, the janitor at each pass.
// Threading: free functions on the caller's Session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/duration.hpp"
#include "store/connection/session.hpp"

namespace sqlstreams::store {

// What to change; an unset member is left as it is.
struct StreamSettingsChange {
  std::optional<std::optional<Millis>> retention;  // set to nullopt inside: keep forever
  std::optional<bool> allow_drop_past_committed;
  std::optional<int32_t> max_payload_bytes;  // 1 .. 64 MiB
  std::optional<bool> notify;
  std::optional<Millis> idempotency_window;  // > 0, <= 36500 days (V011)
  bool empty() const {
    return !retention && !allow_drop_past_committed && !max_payload_bytes && !notify &&
           !idempotency_window;
  }
};

struct StreamSettingsResult {
  std::string changes_json;  // {"setting": {"from": old, "to": new}, ...}; "{}" when none changed
  std::optional<int64_t> audit_id;  // the stream_actions row (none when nothing changed)
};

// Throws StoreError kRejected for an unknown stream or an out-of-range value (the database's
// message names it).
StreamSettingsResult set_stream_settings(Session& session, const std::string& stream,
                                         const StreamSettingsChange& change,
                                         const std::string& actor);

}  // namespace sqlstreams::store
