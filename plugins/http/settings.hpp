// plugins/http — handler `http`'s configuration ([groups.config] of a group): where and how to
// deliver, TLS, the secrets (read from files named in the config, never inline), and what each
// answer means. Settings::read checks every key (closed world: unknown keys are errors) and
// names the key at fault; it is what validate() (config check) and the constructor both run.
// Threading: built once per handler instance, then read-only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "outcome.hpp"

namespace sqlstreams_http {

struct Settings {
  std::string url;              // http:// or https://, no user:password@
  std::string method = "POST";  // POST or PUT
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  int64_t timeout_ms = 10000;                                // the whole request
  int64_t connect_timeout_ms = 5000;                         // the TCP (and TLS) connect
  bool tls_verify = true;                                    // peer certificate and host name
  std::string tls_ca_file;                                   // "" = the system's CA store
  std::string tls_client_cert_file;                          // mutual TLS: both or neither
  std::string tls_client_key_file;
  std::string bearer_token;  // from bearer_token_file ("" = none)
  std::string signing_key;   // decoded from signing_secret_file ("" = unsigned)
  AnswerPolicy answers;

  // Reads and checks `config`; reads the secret files. Throws sqlstreams::ConfigError naming
  // the key (and never a secret's content).
  static Settings read(const nlohmann::json& config);
};

}  // namespace sqlstreams_http
