#include "webhook_signature.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <stdexcept>
#include <vector>

namespace sqlstreams_http {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string decode_signing_secret(std::string_view secret) {
  constexpr std::string_view kPrefix = "whsec_";
  if (secret.substr(0, kPrefix.size()) == kPrefix) secret.remove_prefix(kPrefix.size());
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
    secret.remove_suffix(1);  // a file written by `echo`
  }
  if (secret.empty() || secret.size() % 4 != 0) {
    throw std::invalid_argument(
        "the signing secret must be \"whsec_\" followed by base64 (a length that is a multiple "
        "of 4)");
  }
  for (char c : secret) {
    const bool b64 = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '+' || c == '/' || c == '=';
    if (!b64) throw std::invalid_argument("the signing secret is not base64 after \"whsec_\"");
  }
  std::vector<unsigned char> out(secret.size() / 4 * 3);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(secret.data()),
                                static_cast<int>(secret.size()));
  if (n < 0) throw std::invalid_argument("the signing secret is not valid base64");
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock counts the padding's zero bytes: take them off again.
  for (size_t i = secret.size(); i > 0 && secret[i - 1] == '='; --i) --len;
  if (len < 16) {
    throw std::invalid_argument("the signing secret is shorter than 16 bytes (128 bits)");
  }
  return std::string(reinterpret_cast<const char*>(out.data()), len);
}

std::string webhook_signature(std::string_view key, std::string_view id, int64_t timestamp,
                              std::string_view body) {
  const std::string head = std::string(id) + "." + std::to_string(timestamp) + ".";
  unsigned char mac[EVP_MAX_MD_SIZE];
  // HMAC over head + body without copying the body.
  EVP_MAC* hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* mctx = EVP_MAC_CTX_new(hmac);
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", const_cast<char*>("SHA256"), 0),
                         OSSL_PARAM_construct_end()};
  size_t out_len = 0;
  bool ok =
      mctx != nullptr &&
      EVP_MAC_init(mctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) ==
          1 &&
      EVP_MAC_update(mctx, reinterpret_cast<const unsigned char*>(head.data()), head.size()) == 1 &&
      EVP_MAC_update(mctx, reinterpret_cast<const unsigned char*>(body.data()), body.size()) == 1 &&
      EVP_MAC_final(mctx, mac, &out_len, sizeof mac) == 1;
  EVP_MAC_CTX_free(mctx);
  EVP_MAC_free(hmac);
  if (!ok) throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  return "v1," + base64_encode(std::string_view(reinterpret_cast<const char*>(mac), out_len));
}

}  // namespace sqlstreams_http
