// Connection strings through libpq's parser, with masked printing (see conninfo.hpp).
#include "store/connection/conninfo.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <memory>

namespace sqlstreams::store {
namespace {

constexpr std::string_view kEncodeHint =
    "; in a URI, percent-encode reserved characters of the user name and password ('/' as %2F, "
    "'@' as %40, ':' as %3A, '%' as %25)";

// libpq's reason without any quoted fragment of the input: it is cut at the first quoted
// fragment that is not a one-character token such as "=" or "]".
std::string scrub_libpq_reason(std::string_view message) {
  std::string out;
  for (size_t i = 0; i < message.size(); ++i) {
    const char c = message[i];
    if (c == '\n' || c == '\r') break;
    if (c != '"') {
      out += c;
      continue;
    }
    const bool token = i + 2 < message.size() && message[i + 2] == '"' &&
                       std::string_view("=:/]@?&,").find(message[i + 1]) != std::string::npos;
    if (!token) return out + "\"...\"";
    out.append(message.substr(i, 3));
    i += 2;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// libpq reads the user info of a URI up to the first '@' or '/', and the host up to the next
// '/', ':' or '?'. A password holding an unencoded '/' or '@' is then silently read as part of
// the host, port or database name, and echoed back by the connection error: refuse it here.
void check_uri_user_info(std::string_view uri, size_t start) {
  std::string_view rest = uri.substr(start);
  rest = rest.substr(0, rest.find('?'));
  const size_t stop = rest.find_first_of("@/");
  if (stop == std::string_view::npos) return;
  if (rest[stop] == '/') {
    if (rest.find('@', stop) != std::string_view::npos) {
      throw ConninfoError(
          "the database URI has an '@' after its first '/': the user name or password holds an "
          "unencoded '/' (write it as %2F; an '@' as %40)");
    }
    return;
  }
  const std::string_view host = rest.substr(stop + 1, rest.find('/', stop + 1) - stop - 1);
  if (host.find('@') != std::string_view::npos) {
    throw ConninfoError(
        "the database URI has more than one '@' before its first '/': write an '@' in the user "
        "name or password as %40");
  }
}

std::string quote_value(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

// For display only: printable ASCII, quoted when libpq would need it.
std::string display_value(std::string_view value) {
  std::string clean;
  for (char c : value) clean += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  const bool plain = !clean.empty() && clean.find_first_of(" '\\") == std::string::npos;
  return plain ? clean : quote_value(clean);
}

}  // namespace

Conninfo parse_conninfo(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) {
    throw ConninfoError("the database connection string contains a NUL byte");
  }
  std::string s(text);
  if (const size_t sep = s.find("://"); sep != std::string::npos) {
    std::string scheme = s.substr(0, sep);
    std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (scheme == "postgresql" || scheme == "postgres") {
      s.replace(0, sep, scheme);  // URI schemes are case-insensitive; libpq only knows these
      check_uri_user_info(s, sep + 3);
    } else if (scheme.find_first_of(" =") == std::string::npos) {
      throw ConninfoError(
          "the database URI must start with postgresql:// or postgres:// (or be a key=value "
          "connection string)");
    }
  }
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption*)> parsed(
      PQconninfoParse(s.c_str(), &error), PQconninfoFree);
  if (!parsed) {
    std::string reason = error ? scrub_libpq_reason(error) : "out of memory";
    if (error) PQfreemem(error);
    throw ConninfoError("the database connection string cannot be parsed (libpq: " + reason + ")" +
                        std::string(kEncodeHint));
  }
  Conninfo info;
  for (const PQconninfoOption* o = parsed.get(); o->keyword; ++o) {
    if (o->val) info.options.emplace_back(o->keyword, o->val);
  }
  for (const auto& [key, value] : info.options) {
    if (key != "port") continue;
    const bool digits =
        !value.empty() && value.find_first_not_of("0123456789,") == std::string::npos;
    if (!digits) {
      throw ConninfoError("the port of the database connection string is not a number" +
                          std::string(kEncodeHint));
    }
  }
  return info;
}

std::string describe_conninfo(std::string_view text) {
  try {
    return parse_conninfo(text).display();
  } catch (const ConninfoError&) {
    return "(a connection string that cannot be parsed)";
  }
}

std::string Conninfo::display() const {
  static const char* const kShown[] = {"host", "hostaddr", "port", "dbname", "user", "sslmode"};
  std::string out;
  for (const char* key : kShown) {
    for (const auto& [k, v] : options) {
      if (k == key) out += (out.empty() ? "" : " ") + k + "=" + display_value(v);
    }
  }
  if (!password().empty()) out += std::string(out.empty() ? "" : " ") + "password=***";
  return out.empty() ? "(libpq defaults)" : out;
}

std::string Conninfo::connect_string(
    const std::vector<std::pair<std::string, std::string>>& extra) const {
  std::string out;
  auto add = [&out](const std::string& key, const std::string& value) {
    out += (out.empty() ? "" : " ") + key + "=" + quote_value(value);
  };
  for (const auto& [key, value] : options) {
    const bool overridden =
        std::any_of(extra.begin(), extra.end(), [&key](const auto& e) { return e.first == key; });
    if (!overridden) add(key, value);
  }
  for (const auto& [key, value] : extra) add(key, value);
  return out;
}

const std::string& Conninfo::password() const {
  static const std::string kNone;
  for (const auto& [key, value] : options) {
    if (key == "password") return value;
  }
  return kNone;
}

std::string Conninfo::redact(std::string message) const {
  const std::string& secret = password();
  if (secret.size() < 3) return message;
  for (size_t at = message.find(secret); at != std::string::npos; at = message.find(secret, at)) {
    message.replace(at, secret.size(), "***");
  }
  return message;
}

}  // namespace sqlstreams::store
