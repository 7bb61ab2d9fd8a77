// store/pq — INTERNAL to store/: the libpqxx side of Session. Never include outside store/.
#pragma once

#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

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

// NULL-able text parameter for exec_params (libpqxx 6.4 has no std::optional support).
inline const char* nullable(const std::optional<std::string>& v) {
  return v ? v->c_str() : nullptr;
}

}  // namespace sqlstreams::store
