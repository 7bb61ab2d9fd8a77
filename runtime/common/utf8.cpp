#include "common/utf8.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace sqlstreams {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid, non-NUL UTF-8 sequence starting at text[i], or 0 when it is not one.
size_t valid_sequence(std::string_view text, size_t i) {
  auto at = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = at(i);
  if (b0 == 0) return 0;
  if (b0 < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (i + n > text.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

bool is_clean_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t n = valid_sequence(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string escape_for_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    const size_t n = valid_sequence(text, i);
    if (b == '\\') {
      out += "\\\\";
    } else if (b == '\n') {
      out += "\\n";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b == '\t') {
      out += "\\t";
    } else if (n == 0 || b < 0x20 || b == 0x7F) {
      out += fmt::format("\\x{:02x}", b);  // NUL, other C0, DEL, an invalid byte
      i += 1;
      continue;
    } else if (n == 2 && b == 0xC2 && static_cast<uint8_t>(text[i + 1]) <= 0x9F) {
      out += fmt::format("\\u{:04x}", static_cast<uint8_t>(text[i + 1]));  // C1: U+0080..9F
    } else if (n == 3 && text.substr(i, 2) == "\xE2\x80" &&
               (static_cast<uint8_t>(text[i + 2]) == 0xA8 ||
                static_cast<uint8_t>(text[i + 2]) == 0xA9)) {
      out += fmt::format("\\u20{:02x}", static_cast<uint8_t>(text[i + 2]) - 0x80);
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string sanitize_utf8(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  // Bytes of `out` after the last code point that still leaves room for the marker.
  size_t keep_with_marker = 0;
  const size_t marker_room =
      max_bytes >= kTruncatedMarker.size() ? max_bytes - kTruncatedMarker.size() : max_bytes;
  for (size_t i = 0; i < text.size();) {
    size_t n = valid_sequence(text, i);
    std::string_view piece = n == 0 ? kReplacement : text.substr(i, n);
    i += n == 0 ? 1 : n;
    if (out.size() + piece.size() > max_bytes) {
      out.resize(keep_with_marker);
      if (max_bytes >= kTruncatedMarker.size()) out += kTruncatedMarker;
      return out;
    }
    out += piece;
    if (out.size() <= marker_room) keep_with_marker = out.size();
  }
  return out;
}

}  // namespace sqlstreams
