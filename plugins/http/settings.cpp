#include "settings.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <sqlstreams/config_reader.hpp>

#include "endpoint.hpp"
#include "webhook_signature.hpp"

namespace sqlstreams_http {
namespace {

using sqlstreams::ConfigError;

constexpr size_t kMaxSecretBytes = 64 * 1024;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// A secret file's content. The file must be a regular file, not readable by everyone (the
// same rule ssh applies to a private key), and small.
std::string read_secret(const std::string& key, const std::string& path) {
  if (path.empty() || path[0] != '/') {
    throw ConfigError::at(key, key + ": an absolute path to a file holding the secret");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw ConfigError::at(key, key + ": " + path + " is not a readable regular file");
  }
  if ((st.st_mode & S_IROTH) != 0) {
    throw ConfigError::at(
        key, key + ": " + path + " is readable by every user; chmod o-r it (a secret)");
  }
  if (static_cast<size_t>(st.st_size) > kMaxSecretBytes) {
    throw ConfigError::at(key, key + ": " + path + " is larger than 64 KiB");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError::at(key, key + ": cannot read " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  if (text.empty()) throw ConfigError::at(key, key + ": " + path + " is empty");
  return text;
}

bool printable_header_text(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= 0x20 && c != 0x7f; });
}

bool header_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_';
  });
}

std::vector<StatusPattern> patterns(sqlstreams::ConfigReader& r, const std::string& key,
                                    std::vector<StatusPattern> fallback) {
  if (!r.has(key)) {
    (void)r.get<std::vector<std::string>>(key, {});
    return fallback;
  }
  std::vector<StatusPattern> out;
  const auto texts = r.get<std::vector<std::string>>(key, {});
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      out.push_back(parse_status_pattern(texts[i]));
    } catch (const std::invalid_argument& e) {
      throw ConfigError::at(key + "[" + std::to_string(i) + "]", key + ": " + e.what());
    }
  }
  return out;
}

// The checks every URL of the config gets, naming `key`: no user information (`userinfo_hint`
// says where credentials go instead), a host, no spaces or control bytes, a port 1..65535.
void check_authority(const std::string& key, const std::string& url,
                     const std::string& userinfo_hint) {
  const size_t authority = url.find("://") + 3;
  const size_t end = url.find_first_of("/?#", authority);
  if (url.substr(authority, end - authority).find('@') != std::string::npos) {
    throw ConfigError::at(key, key + ": must not carry a user or password (" + userinfo_hint + ")");
  }
  if (authority == url.size() || end == authority || !printable_header_text(url) ||
      url.find(' ') != std::string::npos) {
    throw ConfigError::at(key, key + ": not a URL with a host and no spaces or control bytes");
  }
  try {
    (void)parse_endpoint(url);
  } catch (const std::invalid_argument& e) {
    throw ConfigError::at(key, key + ": " + e.what());
  }
}

void check_url(const std::string& url) {
  const std::string l = lower(url);
  if (l.rfind("http://", 0) != 0 && l.rfind("https://", 0) != 0) {
    throw ConfigError::at("url", "url: must start with http:// or https://");
  }
  check_authority("url", url, "put a token in bearer_token_file instead");
}

// A forward proxy's URL: http:// (the proxy itself is spoken to in the clear; an https://
// endpoint's TLS goes end to end through its CONNECT tunnel), a host and port, nothing else.
void check_proxy(const std::string& proxy) {
  const std::string l = lower(proxy);
  if (l.rfind("https://", 0) == 0) {
    throw ConfigError::at("proxy",
                          "proxy: an https:// proxy is not supported; give it as http://host:port "
                          "(an https:// url still goes encrypted end to end through the proxy)");
  }
  if (l.rfind("http://", 0) != 0) {
    throw ConfigError::at("proxy", "proxy: must start with http:// (http://host:port)");
  }
  check_authority("proxy", proxy, "put user:password in proxy_credentials_file instead");
  const size_t end = proxy.find_first_of("/?#", proxy.find("://") + 3);
  if (end != std::string::npos && proxy.substr(end) != "/") {
    throw ConfigError::at("proxy", "proxy: only http://host:port (no path, query or fragment)");
  }
}

int64_t ranged(sqlstreams::ConfigReader& r, const std::string& key, int64_t fallback, int64_t lo,
               int64_t hi) {
  const int64_t v = r.get<int64_t>(key, fallback);
  if (v < lo || v > hi) {
    throw ConfigError::at(key, key + ": must be " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

}  // namespace

Settings Settings::read(const nlohmann::json& config) {
  sqlstreams::ConfigReader r(config);
  Settings s;
  if (!r.has("url")) throw ConfigError::at("url", "url: required (where to deliver)");
  s.url = r.get<std::string>("url", "");
  check_url(s.url);
  s.method = r.get<std::string>("method", "POST");
  if (s.method != "POST" && s.method != "PUT") {
    throw ConfigError::at("method", "method: \"POST\" or \"PUT\"");
  }
  const auto headers = r.get<nlohmann::json>("headers", nlohmann::json::object());
  if (!headers.is_object()) {
    throw ConfigError::at("headers", "headers: a table of header names to string values");
  }
  for (const auto& [name, value] : headers.items()) {
    const std::string key = "headers." + name;
    const std::string l = lower(name);
    if (!header_name(name)) throw ConfigError::at(key, key + ": not a header name");
    if (l == "content-type" || l == "authorization" || l == "content-length" || l == "host" ||
        l == "proxy-authorization" || l == "connection" || l == "transfer-encoding" ||
        l.rfind("webhook-", 0) == 0 || l.rfind("sqlstreams-", 0) == 0) {
      throw ConfigError::at(key, key + ": set by the handler itself");
    }
    if (!value.is_string() || !printable_header_text(value.get<std::string>())) {
      throw ConfigError::at(key, key + ": a string without control bytes");
    }
    s.headers.emplace_back(name, value.get<std::string>());
  }
  s.timeout_ms = ranged(r, "timeout_ms", 10000, 1, 600000);
  s.connect_timeout_ms = ranged(r, "connect_timeout_ms", 5000, 1, 600000);
  s.tls_verify = r.get<bool>("tls_verify", true);
  s.tls_ca_file = r.get<std::string>("tls_ca_file", "");
  s.tls_client_cert_file = r.get<std::string>("tls_client_cert_file", "");
  s.tls_client_key_file = r.get<std::string>("tls_client_key_file", "");
  if (s.tls_client_cert_file.empty() != s.tls_client_key_file.empty()) {
    throw ConfigError::at(
        s.tls_client_cert_file.empty() ? "tls_client_cert_file" : "tls_client_key_file",
        "mutual TLS needs both tls_client_cert_file and tls_client_key_file");
  }
  for (const char* key : {"tls_ca_file", "tls_client_cert_file"}) {
    const std::string& path =
        std::string(key) == "tls_ca_file" ? s.tls_ca_file : s.tls_client_cert_file;
    if (!path.empty() && !std::ifstream(path)) {
      throw ConfigError::at(key, std::string(key) + ": cannot read " + path);
    }
  }
  if (!s.tls_client_key_file.empty()) {
    (void)read_secret("tls_client_key_file", s.tls_client_key_file);
  }
  s.proxy = r.get<std::string>("proxy", "");
  if (!s.proxy.empty()) check_proxy(s.proxy);
  const auto proxy_credentials_file = r.get<std::string>("proxy_credentials_file", "");
  if (!proxy_credentials_file.empty()) {
    if (s.proxy.empty()) {
      throw ConfigError::at(
          "proxy_credentials_file",
          "proxy_credentials_file: set only with proxy (the proxy's credentials)");
    }
    const std::string credentials = read_secret("proxy_credentials_file", proxy_credentials_file);
    if (credentials.find(':') == std::string::npos || credentials.find('\n') != std::string::npos ||
        !printable_header_text(credentials)) {
      throw ConfigError::at("proxy_credentials_file",
                            "proxy_credentials_file: " + proxy_credentials_file +
                                " must hold one line user:password (sent as Basic credentials)");
    }
    s.proxy_authorization = "Basic " + base64_encode(credentials);
  }
  const auto token_file = r.get<std::string>("bearer_token_file", "");
  if (!token_file.empty()) {
    s.bearer_token = read_secret("bearer_token_file", token_file);
    if (!printable_header_text(s.bearer_token)) {
      throw ConfigError::at("bearer_token_file",
                            "bearer_token_file: the token holds a control byte");
    }
  }
  const auto secret_file = r.get<std::string>("signing_secret_file", "");
  if (!secret_file.empty()) {
    try {
      s.signing_key = decode_signing_secret(read_secret("signing_secret_file", secret_file));
    } catch (const std::invalid_argument& e) {
      throw ConfigError::at("signing_secret_file",
                            "signing_secret_file: " + secret_file + ": " + e.what());
    }
  }
  s.answers.ok = patterns(r, "ok_statuses", s.answers.ok);
  s.answers.retry = patterns(r, "retry_statuses", s.answers.retry);
  s.answers.error_body_bytes = static_cast<size_t>(ranged(r, "error_body_bytes", 256, 0, 4096));
  s.answers.max_retry_after_ms = ranged(r, "max_retry_after_ms", 3600000, 0, 86400000);
  s.batch_max = static_cast<size_t>(ranged(r, "batch_max", 1, 1, 1000));
  s.batch_linger_ms = ranged(r, "batch_linger_ms", 5, 0, 1000);
  s.transfer_threads = ranged(r, "transfer_threads", 2, 1, 16);
  s.pipeline_depth = ranged(r, "pipeline_depth", 1, 1, 64);
  s.batch_max_bytes =
      static_cast<size_t>(ranged(r, "batch_max_bytes", 1 << 20, 1024, int64_t{64} << 20));
  r.reject_unknown_keys();
  return s;
}

}  // namespace sqlstreams_http
