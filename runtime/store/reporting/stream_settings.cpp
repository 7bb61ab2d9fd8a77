#include "store/reporting/stream_settings.hpp"

#include <fmt/format.h>

#include <type_traits>

#include "store/core/pq.hpp"

namespace sqlstreams::store {
namespace {
constexpr StatementName kSetStreamSettings{"set_stream_settings"};
}  // namespace

StreamSettingsResult set_stream_settings(Session& session, const std::string& stream,
                                         const StreamSettingsChange& change,
                                         const std::string& actor) {
  return guarded(session, "set stream settings", [&] {
    // libpqxx 6.4 takes NULL-able parameters as text only.
    auto text = [](const auto& v) -> std::optional<std::string> {
      if (!v) return std::nullopt;
      if constexpr (std::is_same_v<std::decay_t<decltype(*v)>, bool>) {
        return std::string(*v ? "true" : "false");
      } else {
        return std::to_string(*v);
      }
    };
    std::optional<std::string> retention_ms;
    if (change.retention && *change.retention) {
      retention_ms = std::to_string(change.retention->value().count());
    }
    std::optional<std::string> window_ms;
    if (change.idempotency_window) {
      window_ms = std::to_string(change.idempotency_window->count());
    }
    pqxx::work tx(connection_of(session));
    const pqxx::row r = [&] {
      try {
        return exec1(tx, kSetStreamSettings,
                     fmt::format("SELECT present, changes::text, audit_id FROM "
                                 "{}.set_stream_settings($1, $2, $3, $4, $5, $6, $7, $8)",
                                 session.schema_sql()),
                     stream, change.retention.has_value(), nullable(retention_ms),
                     nullable(text(change.allow_drop_past_committed)),
                     nullable(text(change.max_payload_bytes)), nullable(text(change.notify)), actor,
                     nullable(window_ms));
      } catch (const pqxx::sql_error& e) {
        // invalid_parameter_value: the function's own range checks ("sqlstreams: …").
        const std::string what = e.what();
        const size_t from = what.find("sqlstreams: ");
        if (from == std::string::npos) throw;
        const std::string message = what.substr(from, what.find('\n', from) - from);
        throw StoreError(StoreError::Kind::kRejected,
                         fmt::format("cannot change the settings of stream '{}': {}", stream,
                                     message.substr(std::string("sqlstreams: ").size())));
      }
    }();
    if (!r[0].as<bool>()) {
      throw StoreError(StoreError::Kind::kRejected, fmt::format("no stream '{}'", stream));
    }
    tx.commit();
    StreamSettingsResult out;
    out.changes_json = r[1].as<std::string>();
    if (!r[2].is_null()) out.audit_id = r[2].as<int64_t>();
    return out;
  });
}

}  // namespace sqlstreams::store
