// store/conninfo: the matrix of connection strings libpq used to echo with the password
// (an unencoded '/' or '@' in the password, bad percent-encoding, a broken IPv6 bracket, an
// upper-case scheme, an escaped quote in key=value form, a url_file holding only a password).
// Each is either refused with a message free of the secret, or parsed with the secret masked
// (docs/operating/security.md#secrets-and-configuration).
#include "store/connection/conninfo.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sqlstreams::store {
namespace {

// The secret and its halves: a misparse that leaks half a password is a leak too.
constexpr const char* kSecret = "Pw9xQzK7";
const std::vector<std::string> kFragments = {"Pw9x", "QzK7", "9xQz"};

void expect_no_secret(const std::string& text, const std::string& input) {
  for (const auto& f : kFragments) {
    EXPECT_EQ(text.find(f), std::string::npos) << "leaks '" << f << "' of " << input << ":\n"
                                               << text;
  }
}

std::string refusal(const std::string& input) {
  try {
    Conninfo info = parse_conninfo(input);
    ADD_FAILURE() << "parsed: " << input << " as " << info.display();
    return "";
  } catch (const ConninfoError& e) {
    expect_no_secret(e.what(), input);
    EXPECT_EQ(describe_conninfo(input), "(a connection string that cannot be parsed)");
    return e.what();
  }
}

TEST(Conninfo, RefusesTheMatrixWithoutEchoingThePassword) {
  const std::string s = kSecret;
  const std::string slash = "postgresql://app:" + s.substr(0, 4) + "/" + s.substr(4) + "@db/app";
  EXPECT_NE(refusal(slash).find("unencoded '/'"), std::string::npos);
  const std::string at = "postgresql://app:" + s.substr(0, 4) + "@" + s.substr(4) + "@db/app";
  EXPECT_NE(refusal(at).find("%40"), std::string::npos);
  const std::string bad_percent =
      "postgresql://app:" + s.substr(0, 4) + "%zz" + s.substr(4) + "@db/app";
  EXPECT_NE(refusal(bad_percent).find("invalid percent-encoded token"), std::string::npos);
  const std::string ipv6 = "postgresql://app:" + s + "@[::1/app";
  EXPECT_NE(refusal(ipv6).find("IPv6"), std::string::npos);
  const std::string only_password = s;  // a url_file holding only the password
  EXPECT_NE(refusal(only_password).find("missing \"=\" after \"...\""), std::string::npos);
  refusal("mysql://app:" + s + "@db/app");
  refusal("host=db password='" + s);  // unterminated quote
  refusal("host=db port=" + s);
  refusal("postgresql://app:" + s + "@db:" + s + "/app");
  refusal("host=db " + s + "=1");  // an unknown option named like the secret
  refusal(std::string("host=db\0password=", 17) + s);
}

TEST(Conninfo, UpperCaseSchemeIsAUriAndIsMasked) {
  Conninfo info =
      parse_conninfo(std::string("POSTGRESQL://app:") + kSecret + "@db.internal:5433/app");
  EXPECT_EQ(info.password(), kSecret);
  EXPECT_EQ(info.display(), "host=db.internal port=5433 dbname=app user=app password=***");
}

TEST(Conninfo, EscapedQuoteInKeyValueFormIsOnePassword) {
  const std::string input = std::string("host=db user=app password='Pw9x\\'QzK7' dbname=app");
  Conninfo info = parse_conninfo(input);
  EXPECT_EQ(info.password(), "Pw9x'QzK7");
  EXPECT_EQ(info.display(), "host=db dbname=app user=app password=***");
  // The rebuilt string round-trips through libpq's parser to the same password.
  Conninfo again = parse_conninfo(info.connect_string({{"application_name", "x y'z"}}));
  EXPECT_EQ(again.password(), "Pw9x'QzK7");
  EXPECT_EQ(again.display(), info.display());
}

TEST(Conninfo, EncodedAndQueryPasswordsAreMasked) {
  for (const std::string& input :
       {std::string("postgresql://app:Pw9x%2FQzK7@db/app"),
        std::string("postgres://app@db/app?password=Pw9xQzK7&sslmode=require"),
        std::string("host=db user=app password=Pw9xQzK7 dbname=app")}) {
    Conninfo info = parse_conninfo(input);
    EXPECT_FALSE(info.password().empty()) << input;
    expect_no_secret(info.display(), input);
    expect_no_secret(describe_conninfo(input), input);
    EXPECT_NE(info.display().find("password=***"), std::string::npos) << info.display();
    expect_no_secret(info.redact("FATAL: bad password " + info.password()), input);
  }
}

TEST(Conninfo, ExtraOptionsWinAndNoPasswordMeansLibpqDefaults) {
  Conninfo info = parse_conninfo("postgresql://db/app?connect_timeout=99");
  const std::string rebuilt = info.connect_string({{"connect_timeout", "5"}});
  EXPECT_NE(rebuilt.find("host='db'"), std::string::npos) << rebuilt;
  EXPECT_NE(rebuilt.find("dbname='app'"), std::string::npos) << rebuilt;
  EXPECT_EQ(rebuilt.find("99"), std::string::npos) << rebuilt;
  EXPECT_EQ(rebuilt.substr(rebuilt.size() - 19), "connect_timeout='5'") << rebuilt;
  EXPECT_EQ(info.display(), "host=db dbname=app");
  EXPECT_EQ(parse_conninfo("").display(), "(libpq defaults)");
}

}  // namespace
}  // namespace sqlstreams::store
