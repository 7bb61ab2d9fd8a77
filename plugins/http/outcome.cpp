#include "outcome.hpp"

#include <time.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

namespace sqlstreams_http {
namespace {

bool any_matches(const std::vector<StatusPattern>& patterns, int status) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [status](const StatusPattern& p) { return p.matches(status); });
}

// Bytes of the UTF-8 sequence starting at s[i], or 0 when it is not a valid one.
size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  }
  return n;
}

std::string trimmed(std::string_view v) {
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  return std::string(v);
}

}  // namespace

StatusPattern parse_status_pattern(std::string_view text) {
  const auto bad = [&] {
    return std::invalid_argument("\"" + std::string(text) +
                                 "\" is not a status (\"404\") or a class of them (\"5xx\")");
  };
  if (text.size() != 3 || text[0] < '1' || text[0] > '5') throw bad();
  if (text.substr(1) == "xx") {
    const int hundred = (text[0] - '0') * 100;
    return {hundred, hundred + 99};
  }
  int status = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), status);
  if (ec != std::errc() || end != text.data() + text.size()) throw bad();
  return {status, status};
}

std::optional<int64_t> parse_retry_after(std::string_view value, int64_t now_unix_s) {
  const std::string v = trimmed(value);
  if (v.empty()) return std::nullopt;
  if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (v.size() > 9) return int64_t{999'999'999} * 1000;  // absurd: the caller caps it
    return std::stoll(v) * 1000;
  }
  struct tm tm {};
  const char* end = strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  const int64_t at = timegm(&tm);
  return std::max<int64_t>(0, at - now_unix_s) * 1000;
}

std::string printable_prefix(std::string_view body, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < body.size()) {
    const auto c = static_cast<unsigned char>(body[i]);
    std::string piece;
    size_t n = utf8_length(body, i);
    if (n == 0 || c < 0x20 || c == 0x7f || c == '\\') {
      n = 1;
      switch (c) {
        case '\n':
          piece = "\\n";
          break;
        case '\r':
          piece = "\\r";
          break;
        case '\t':
          piece = "\\t";
          break;
        case '\\':
          piece = "\\\\";
          break;
        default: {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          piece = hex;
        }
      }
    } else {
      piece.assign(body.substr(i, n));
    }
    if (out.size() + piece.size() > max_bytes) {
      out += "…";
      break;
    }
    out += piece;
    i += n;
  }
  return out;
}

Decision decide(const Answer& answer, const AnswerPolicy& policy, int64_t now_unix_s) {
  if (!answer.transport_error.empty()) {
    return {Verdict::kRetry, 0, "no HTTP answer: " + answer.transport_error};
  }
  if (any_matches(policy.ok, answer.status)) return {Verdict::kOk, 0, ""};
  std::string error = "HTTP " + std::to_string(answer.status);
  const std::string body = printable_prefix(answer.body, policy.error_body_bytes);
  if (!body.empty()) error += ": " + body;
  if (any_matches(policy.retry, answer.status)) {
    if (answer.retry_after) {
      if (auto ms = parse_retry_after(*answer.retry_after, now_unix_s)) {
        return {Verdict::kDelay, std::min(*ms, policy.max_retry_after_ms), ""};
      }
    }
    return {Verdict::kRetry, 0, error};
  }
  return {Verdict::kTerminal, 0, error};
}

std::vector<Decision> decide_batch(const Answer& answer, const AnswerPolicy& policy,
                                   int64_t now_unix_s, const std::vector<int64_t>& ids) {
  const Decision all = decide(answer, policy, now_unix_s);
  std::vector<Decision> out(ids.size(), all);
  if (all.verdict != Verdict::kOk || answer.body.empty()) return out;
  const auto doc = nlohmann::json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array()) return out;
  std::unordered_map<int64_t, size_t> index;
  for (size_t i = 0; i < ids.size(); ++i) index.emplace(ids[i], i);
  for (const auto& r : doc["results"]) {
    if (!r.is_object() || !r.contains("id") || !r["id"].is_number_integer()) continue;
    auto it = index.find(r["id"].get<int64_t>());
    if (it == index.end()) continue;  // not a message of this request
    Decision& d = out[it->second];
    const std::string outcome =
        r.contains("outcome") && r["outcome"].is_string() ? r["outcome"].get<std::string>() : "";
    const std::string error =
        r.contains("error") && r["error"].is_string()
            ? printable_prefix(r["error"].get<std::string>(), policy.error_body_bytes)
            : "";
    if (outcome == "ok") {
      d = {Verdict::kOk, 0, ""};
    } else if (outcome == "retry") {
      d = {Verdict::kRetry, 0, "receiver: " + (error.empty() ? "retry" : error)};
    } else if (outcome == "terminal") {
      d = {Verdict::kTerminal, 0, "receiver: " + (error.empty() ? "terminal" : error)};
    } else if (outcome == "delay" && r.contains("delay_ms") && r["delay_ms"].is_number_integer() &&
               r["delay_ms"].get<int64_t>() >= 0) {
      d = {Verdict::kDelay, std::min(r["delay_ms"].get<int64_t>(), policy.max_retry_after_ms), ""};
    } else {
      d = {Verdict::kRetry, 0,
           "receiver named no outcome this handler knows: " +
               printable_prefix(r.dump(), policy.error_body_bytes)};
    }
  }
  return out;
}

}  // namespace sqlstreams_http
