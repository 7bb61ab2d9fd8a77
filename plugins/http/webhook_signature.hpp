// plugins/http — Standard Webhooks signing (https://www.standardwebhooks.com): the
// `webhook-signature` value a receiver's stock library verifies. Pure functions over OpenSSL's
// HMAC-SHA256 and base64; no state, callable from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sqlstreams_http {

// The signing key's bytes from a secret as the specification writes it: "whsec_" followed by
// the base64 of the key (the prefix is optional). Throws std::invalid_argument naming what is
// wrong (never the secret itself).
std::string decode_signing_secret(std::string_view secret);

// "v1,<base64 of HMAC-SHA256(key, id + "." + timestamp + "." + body)>".
std::string webhook_signature(std::string_view key, std::string_view id, int64_t timestamp,
                              std::string_view body);

std::string base64_encode(std::string_view bytes);

}  // namespace sqlstreams_http
