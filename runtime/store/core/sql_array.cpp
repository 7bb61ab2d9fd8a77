#include "store/core/sql_array.hpp"

#include <arpa/inet.h>

#include <limits>
#include <stdexcept>

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

void append_int32(std::string& out, uint32_t value) {
  const uint32_t net = htonl(value);
  out.append(reinterpret_cast<const char*>(&net), sizeof net);
}

constexpr uint32_t kJsonbOid = 3802;  // pg_type.oid of jsonb (fixed, built in)
constexpr char kJsonbVersion = 1;     // jsonb_recv's format version

}  // namespace

std::string jsonb_binary_array(const std::vector<std::string_view>& values) {
  size_t total = 20;
  for (auto v : values) total += 5 + v.size();
  std::string out;
  out.reserve(total);
  append_int32(out, 1);  // dimensions
  append_int32(out, 0);  // flags: no NULL elements
  append_int32(out, kJsonbOid);
  append_int32(out, static_cast<uint32_t>(values.size()));
  append_int32(out, 1);  // lower bound
  for (auto v : values) {
    if (v.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      throw std::length_error("jsonb_binary_array: element of 2 GiB or more");
    }
    append_int32(out, static_cast<uint32_t>(v.size() + 1));
    out += kJsonbVersion;
    out.append(v.data(), v.size());
  }
  return out;
}

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
