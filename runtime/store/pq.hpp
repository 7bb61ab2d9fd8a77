// store/pq — INTERNAL to store/: the libpqxx side of Session. Never include outside store/.
#pragma once

#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "store/group_store.hpp"
#include "store/session.hpp"

namespace sqlstreams::store {

struct SessionImpl {
  std::unique_ptr<pqxx::connection> conn;
  // LISTEN registrations; destroyed before the connection they are registered with.
  std::vector<std::unique_ptr<pqxx::notification_receiver>> receivers;
  int notifications = 0;
  void drop() {
    receivers.clear();
    conn.reset();
  }
};

// The live connection of a session, connecting first if needed.
pqxx::connection& connection_of(Session& session);

// Runs `fn` translating libpqxx errors into StoreError; a broken connection resets the session.
template <class Fn>
auto guarded(Session& session, const char* what, Fn&& fn) -> decltype(fn());

[[noreturn]] void rethrow_as_store_error(Session& session, const char* what);

template <class Fn>
auto guarded(Session& session, const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const StoreError&) {
    throw;
  } catch (...) {
    rethrow_as_store_error(session, what);
  }
}

// The column list every log read uses, and its decoding into a StoredMessage.
inline constexpr const char* kMessageColumns =
    "id, (extract(epoch FROM created_at) * 1000)::bigint, schema_version, message_key, "
    "payload::text";
inline StoredMessage message_from_row(const pqxx::row& row) {
  StoredMessage m;
  m.id = row[0].as<int64_t>();
  m.created_at_unix_ms = row[1].as<int64_t>();
  m.schema_version = row[2].as<int32_t>();
  if (!row[3].is_null()) m.key = row[3].as<std::string>();
  m.payload = row[4].as<std::string>();
  return m;
}

// Registers `sql` as the prepared statement `name` on `conn` and returns the name, for
// tx.exec_prepared(name, ...): the hot statements are parsed and planned once per connection,
// not per call. libpqxx sends the PREPARE on first use and keeps a connection's registrations
// only as long as that connection (Session::reset() drops them with it: the next use prepares
// again). Re-registering the same text is a map lookup; a name must always mean one text
// (libpqxx throws on a different one), so names carry every input of the text (stream id...).
inline const std::string& prepared(pqxx::connection& conn, const std::string& name,
                                   const std::string& sql) {
  conn.prepare(name, sql);
  return name;
}

// NULL-able text parameter for exec_params (libpqxx 6.4 has no std::optional support).
inline const char* nullable(const std::optional<std::string>& v) {
  return v ? v->c_str() : nullptr;
}

}  // namespace sqlstreams::store
