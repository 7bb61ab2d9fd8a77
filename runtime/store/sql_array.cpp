#include "store/sql_array.hpp"

namespace sqlstreams::store {
namespace {

void append_quoted(std::string& out, const std::string& v) {
  out += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

std::string int_array(const std::vector<int64_t>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "}";
}

std::string text_array(const std::vector<std::optional<std::string>>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    if (values[i]) {
      append_quoted(out, *values[i]);
    } else {
      out += "NULL";
    }
  }
  return out + "}";
}

std::string text_array(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    append_quoted(out, values[i]);
  }
  return out + "}";
}

}  // namespace sqlstreams::store
