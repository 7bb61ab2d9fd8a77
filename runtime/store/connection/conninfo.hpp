// store/connection/conninfo — the one place a database connection string is read. Owns: parsing
// with libpq's own parser (PQconninfoParse) before anything connects, the checks that catch a
// password libpq would silently misread as a host, port or database name (an unencoded '/' or
// '@' in a URI's user info), and every printable form of a connection string. No message built
// here or from a Conninfo ever contains the input text or the password: errors name the
// problem in our own words plus libpq's reason with its quoted fragments removed, and
// display() lists only masked parts (password=***).
// Threading: pure functions; Conninfo is a value.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sqlstreams::store {

// A connection string that cannot be used. what() never contains the input or its password.
class ConninfoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Conninfo {
  std::vector<std::pair<std::string, std::string>> options;  // keyword → value, as given
  // host, port, dbname, user (and sslmode, when given) with the password as ***, e.g.
  // "host=db port=5432 dbname=app user=app password=***". Safe for logs, errors and pages.
  std::string display() const;
  // A key=value connection string of every option plus the given ones (which win); for libpq.
  std::string connect_string(const std::vector<std::pair<std::string, std::string>>& extra) const;
  // `message` with every occurrence of the password (3 characters or more) replaced by ***.
  std::string redact(std::string message) const;
  const std::string& password() const;  // "" when the string has none (PGPASSWORD, .pgpass)
};

// Parses a URI ("postgresql://...", scheme in any case) or key=value connection string.
// Throws ConninfoError saying what is wrong and how to fix it.
Conninfo parse_conninfo(std::string_view text);

// display() of the parsed string, or "(a connection string that cannot be parsed)".
std::string describe_conninfo(std::string_view text);

}  // namespace sqlstreams::store
