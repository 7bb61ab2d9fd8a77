// store/connection/session — one database connection owned by one thread at a time, reconnected on
// demand. Owns: the libpqxx connection (hidden behind a pimpl so no caller sees libpqxx), the
// quoted schema name, and the translation of libpqxx errors into StoreError. Threading: not
// thread-safe; give each thread its own Session (the "pool" is one per loop).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/duration.hpp"
#include "store/errors.hpp"

namespace sqlstreams::store {

struct SessionImpl;

struct SessionOptions {
  std::string url;
  std::string schema = "sqlstreams";
  Millis connect_timeout{5000};
  std::string application_name = "sqlstreams";
};

class Session {
 public:
  explicit Session(SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const SessionOptions& options() const { return options_; }
  // The schema as a quoted SQL identifier, e.g. "sqlstreams".
  const std::string& schema_sql() const { return schema_sql_; }
  // Connects now (throws StoreError kConnection with the masked URL on failure).
  void connect();
  bool connected() const;
  // Drops the connection; the next use reconnects.
  void reset();

  SessionImpl& impl();

 private:
  SessionOptions options_;
  std::string schema_sql_;
  std::unique_ptr<SessionImpl> impl_;
};

// Quotes an identifier for SQL ("a""b"). Schema names are validated by config beforehand.
std::string quote_identifier(const std::string& name);

}  // namespace sqlstreams::store
