#include "store/connection/session.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "common/identifier.hpp"
#include "store/connection/conninfo.hpp"
#include "store/core/pq.hpp"
#include "store/core/sqlstate.hpp"

namespace sqlstreams::store {

std::string quote_identifier(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {

// The server settings every host session runs with, after any the URL's own `options` give.
// jit=off: the runtime's statements are short index probes, but a range commit's "message still
// stored" probe is costed as a scan of every partition of the log, so on a stream of a few hundred
// partitions its estimate passes jit_above_cost and PostgreSQL spent ~2 s compiling it on every
// commit (1.5 ms without; the 2026-12-03 chaos drain, tests/chaos/README.md). JIT never pays for
// statements of a few milliseconds; a user's own sessions keep their setting.
std::string server_options(const Conninfo& info) {
  const char* env = std::getenv("PGOPTIONS");  // libpq's default when the URL gives none
  std::string out = env != nullptr && *env != '\0' ? std::string(env) + " " : "";
  for (const auto& [key, value] : info.options) {
    if (key == "options") out = value + " ";
  }
  return out + "-c jit=off";
}

}  // namespace

Session::Session(SessionOptions options)
    : options_(std::move(options)),
      schema_sql_(quote_identifier(options_.schema)),
      impl_(std::make_unique<SessionImpl>()) {
  // The migrations splice the schema into SQL (also inside string literals): the config's
  // identifier rule is checked here too, whatever path the name took.
  if (!is_valid_identifier(options_.schema)) {
    throw StoreError(
        StoreError::Kind::kRejected,
        fmt::format("schema name: {} (got {} bytes)", kIdentifierProblem, options_.schema.size()));
  }
}

Session::~Session() { impl_->drop(); }

SessionImpl& Session::impl() { return *impl_; }

bool Session::connected() const { return impl_->conn && impl_->conn->is_open(); }

void Session::reset() { impl_->drop(); }

void Session::connect() {
  if (connected()) return;
  impl_->drop();
  Conninfo info;
  try {
    info = parse_conninfo(options_.url);
  } catch (const ConninfoError& e) {
    throw StoreError(StoreError::Kind::kRejected, e.what());
  }
  const long timeout_s =
      std::max<long>(1, static_cast<long>((options_.connect_timeout.count() + 999) / 1000));
  // Rebuilt from the parsed options: libpq never re-reads (or echoes) the text as given.
  const std::string conninfo = info.connect_string({{"connect_timeout", std::to_string(timeout_s)},
                                                    {"application_name", options_.application_name},
                                                    {"options", server_options(info)}});
  try {
    impl_->conn = std::make_unique<pqxx::connection>(conninfo);
  } catch (const std::exception& e) {
    std::string msg = info.redact(e.what());
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    throw StoreError(StoreError::Kind::kConnection,
                     fmt::format("cannot connect to {}: {}", info.display(), msg));
  }
}

pqxx::connection& connection_of(Session& session) {
  session.connect();
  return *session.impl().conn;
}

void rethrow_as_store_error(Session& session, const char* operation) {
  // "claim: statement sqlstreams_claim_lock_3" when a named statement failed (core/pq.hpp).
  std::string what = operation;
  try {
    throw;
  } catch (const FailedStatement& f) {
    what += ": statement " + f.statement();
  } catch (...) {
  }
  auto trimmed = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  };
  try {
    throw;
  } catch (const pqxx::broken_connection& e) {
    session.reset();
    throw StoreError(StoreError::Kind::kConnection,
                     fmt::format("{}: connection lost: {}", what, trimmed(e.what())));
  } catch (const pqxx::in_doubt_error& e) {
    session.reset();
    throw StoreError(StoreError::Kind::kInDoubt,
                     fmt::format("{}: commit outcome unknown: {}", what, trimmed(e.what())));
  } catch (const pqxx::sql_error& e) {
    const std::string state = sqlstate_of(e);
    const StoreError::Kind kind = kind_of(state);
    if (kind == StoreError::Kind::kConnection) session.reset();
    if (session.connected() && !session.impl().conn->is_open()) session.reset();
    throw StoreError(kind, fmt::format("{}: {}", what, trimmed(e.what())), state);
  } catch (const pqxx::transaction_rollback& e) {
    // A deadlock or serialization failure outside a named statement (a COMMIT's): libpqxx 6.4
    // throws it without a code and not as an sql_error (core/pqxx_sqlstate.hpp).
    const std::string state = sqlstate_of(e);
    throw StoreError(kind_of(state), fmt::format("{}: {}", what, trimmed(e.what())), state);
  } catch (const pqxx::failure& e) {
    // libpqxx reports some lost connections as plain failures.
    if (session.impl().conn && !session.impl().conn->is_open()) {
      session.reset();
      throw StoreError(StoreError::Kind::kConnection,
                       fmt::format("{}: connection lost: {}", what, trimmed(e.what())));
    }
    throw StoreError(StoreError::Kind::kOther, fmt::format("{}: {}", what, trimmed(e.what())));
  } catch (const std::exception& e) {
    throw StoreError(StoreError::Kind::kOther, fmt::format("{}: {}", what, trimmed(e.what())));
  }
}

}  // namespace sqlstreams::store
