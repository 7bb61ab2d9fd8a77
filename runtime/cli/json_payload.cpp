#include "cli/json_payload.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace sqlstreams::cli {
namespace {

using Json = nlohmann::json;

// Counts nesting and rejects what PostgreSQL would refuse; returning false stops the parser.
class Checker : public nlohmann::json_sax<Json> {
 public:
  std::optional<std::string> problem;

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("boolean"); }
  bool number_integer(number_integer_t) override { return scalar("number"); }
  bool number_unsigned(number_unsigned_t) override { return scalar("number"); }
  bool number_float(number_float_t, const string_t&) override { return scalar("number"); }
  bool string(string_t& s) override { return scalar("string") && no_nul(s, "a string"); }
  bool binary(binary_t&) override { return scalar("binary"); }
  bool key(string_t& s) override { return no_nul(s, "a key"); }
  bool start_object(std::size_t) override { return open("object"); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open("array"); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    if (!problem) problem = fmt::format("invalid JSON: {}", e.what());
    return false;
  }

 private:
  bool fail(std::string why) {
    problem = std::move(why);
    return false;
  }
  bool scalar(const char* type) {
    if (depth_ == 0) return fail(fmt::format("payload must be a JSON object (got {})", type));
    return true;
  }
  bool open(const char* type) {
    if (depth_ == 0 && std::string_view(type) != "object") {
      return fail(fmt::format("payload must be a JSON object (got {})", type));
    }
    if (++depth_ > kMaxJsonDepth) {
      return fail(fmt::format("payload nested deeper than {} levels", kMaxJsonDepth));
    }
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  bool no_nul(const string_t& s, const char* what) {
    if (s.find('\0') == string_t::npos) return true;
    return fail(fmt::format("{} contains \\u0000, which PostgreSQL's jsonb cannot store", what));
  }
  int depth_ = 0;
};

}  // namespace

std::optional<std::string> payload_problem(std::string_view text) {
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    return fmt::format("NUL byte at column {}: JSON text cannot contain one", nul + 1);
  }
  Checker checker;
  const bool ok = Json::sax_parse(text.begin(), text.end(), &checker);
  if (checker.problem) return checker.problem;
  if (!ok) return std::string("invalid JSON");
  return std::nullopt;
}

}  // namespace sqlstreams::cli
