// store/core/pq — INTERNAL to store/: the libpqxx side of Session. Never include outside store/.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.hpp"
#include "store/connection/session.hpp"
#include "store/core/pqxx_sqlstate.hpp"
#include "store/core/sql_time.hpp"
#include "store/core/statement.hpp"
#include "store/group/group_store.hpp"

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
inline std::string message_columns() {
  return fmt::format("id, {}, schema_version, message_key, payload::text",
                     to_epoch_ms("created_at"));
}
inline StoredMessage message_from_row(const pqxx::row& row) {
  StoredMessage m;
  m.id = row[0].as<int64_t>();
  m.created_at_unix_ms = row[1].as<int64_t>();
  m.schema_version = row[2].as<int32_t>();
  if (!row[3].is_null()) m.key = row[3].as<std::string>();
  m.payload = row[4].as<std::string>();
  return m;
}

// Carried by the libpqxx exceptions the helpers rethrow: which statement failed.
class FailedStatement {
 public:
  explicit FailedStatement(std::string name) : name_(std::move(name)) {}
  virtual ~FailedStatement() = default;
  const std::string& statement() const { return name_; }

 private:
  std::string name_;
};

// The same error (message, query, SQLSTATE) as a pqxx::sql_error that names its statement; a
// code libpqxx 6.4 dropped is recovered from the error's type (core/pqxx_sqlstate.hpp), and a
// transaction_rollback (not an sql_error there) becomes one with its code.
class NamedSqlError : public pqxx::sql_error, public FailedStatement {
 public:
  NamedSqlError(std::string name, const pqxx::sql_error& e)
      : NamedSqlError(std::move(name), e.what(), e.query(), sqlstate_of(e)) {}
  NamedSqlError(std::string name, const pqxx::transaction_rollback& e)
      : NamedSqlError(std::move(name), e.what(), "", sqlstate_of(e)) {}

 private:
  NamedSqlError(std::string name, const char* what, const std::string& query,
                const std::string& sqlstate)
      : pqxx::sql_error(what, query, sqlstate.empty() ? nullptr : sqlstate.c_str()),
        FailedStatement(std::move(name)) {}
};
class NamedBrokenConnection : public pqxx::broken_connection, public FailedStatement {
 public:
  NamedBrokenConnection(std::string name, const pqxx::broken_connection& e)
      : pqxx::broken_connection(e.what()), FailedStatement(std::move(name)) {}
};
class NamedFailure : public pqxx::failure, public FailedStatement {
 public:
  NamedFailure(std::string name, const pqxx::failure& e)
      : pqxx::failure(e.what()), FailedStatement(std::move(name)) {}
};

// Runs `fn`, rethrowing a statement failure as its named twin.
template <class Fn>
auto named(std::string_view name, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const FailedStatement&) {
    throw;
  } catch (const pqxx::sql_error& e) {
    throw NamedSqlError(std::string(name), e);
  } catch (const pqxx::broken_connection& e) {
    throw NamedBrokenConnection(std::string(name), e);
  } catch (const pqxx::in_doubt_error&) {
    throw;  // a COMMIT's outcome: not a statement's failure
  } catch (const pqxx::transaction_rollback& e) {
    throw NamedSqlError(std::string(name), e);  // 40001, 40P01...: with their code
  } catch (const pqxx::failure& e) {
    throw NamedFailure(std::string(name), e);
  }
}

// The statement `sql` named `name`: with parameters through exec_params (extended protocol),
// without through exec (simple protocol: the text may hold several statements).
template <class... Args>
pqxx::result exec(pqxx::transaction_base& tx, StatementName name, const std::string& sql,
                  Args&&... args) {
  return named(name.value, [&] {
    if constexpr (sizeof...(Args) == 0) {
      return tx.exec(sql);
    } else {
      return tx.exec_params(sql, std::forward<Args>(args)...);
    }
  });
}

// As exec(), for a statement that returns exactly one row (pqxx::unexpected_rows otherwise).
template <class... Args>
pqxx::row exec1(pqxx::transaction_base& tx, StatementName name, const std::string& sql,
                Args&&... args) {
  return named(name.value, [&] {
    if constexpr (sizeof...(Args) == 0) {
      return tx.exec1(sql);
    } else {
      return tx.exec_params1(sql, std::forward<Args>(args)...);
    }
  });
}

// Registers `st` on `conn` (once per connection; libpqxx sends the PREPARE on first use) and
// executes it. A name must always mean one text (libpqxx throws on a different one), so the
// name carries every input of the text (the stream id...).
template <class... Args>
pqxx::result exec_prepared(pqxx::transaction_base& tx, pqxx::connection_base& conn,
                           const Statement& st, Args&&... args) {
  return named(st.name, [&] {
    conn.prepare(st.name, st.sql);
    return tx.exec_prepared(st.name, std::forward<Args>(args)...);
  });
}

// NULL-able text parameter for exec_params (libpqxx 6.4 has no std::optional support).
inline const char* nullable(const std::optional<std::string>& v) {
  return v ? v->c_str() : nullptr;
}

}  // namespace sqlstreams::store
