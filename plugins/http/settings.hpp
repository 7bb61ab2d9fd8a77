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
  std::string proxy;                // "" = direct; else http://host:port of a forward proxy
  std::string proxy_authorization;  // "Basic ..." from proxy_credentials_file ("" = none)
  std::string bearer_token;         // from bearer_token_file ("" = none)
  std::string signing_key;          // decoded from signing_secret_file ("" = unsigned)
  AnswerPolicy answers;
  size_t batch_max = 1;              // messages per request; > 1: batch mode (a JSON array)
  int64_t batch_linger_ms = 5;       // how long a partial batch waits for more
  size_t batch_max_bytes = 1 << 20;  // of the array's elements (at least one message)
  int64_t transfer_threads = 2;      // threads driving the requests (spread round robin)
  int64_t pipeline_depth = 1;        // requests a connection carries at once (> 1: pipelining)
  // What a transfer keeps of the answer's body: the error prefix, or in batch mode enough to
  // read per-message outcomes.
  size_t answer_body_bytes() const {
    return batch_max > 1 ? size_t{1} << 20 : answers.error_body_bytes;
  }

  // Reads and checks `config`; reads the secret files. Throws sqlstreams::ConfigError naming
  // the key (and never a secret's content).
  static Settings read(const nlohmann::json& config);
};

}  // namespace sqlstreams_http
