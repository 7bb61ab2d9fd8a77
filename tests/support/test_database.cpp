#include "test_database.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace sqlstreams::testing {

std::string admin_url() {
  const char* url = std::getenv("SQLSTREAMS_TEST_DATABASE_URL");
  if (!url || !*url) {
    throw std::runtime_error(
        "SQLSTREAMS_TEST_DATABASE_URL is not set: run the suite with scripts/test.sh, which "
        "starts a throwaway PostgreSQL");
  }
  return url;
}

std::string with_database(const std::string& url, const std::string& db) {
  auto scheme = url.find("://");
  auto slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  auto query = url.find('?');
  std::string base = slash == std::string::npos ? url : url.substr(0, slash);
  std::string rest = query == std::string::npos ? "" : url.substr(query);
  return base + "/" + db + rest;
}

TestDatabase::TestDatabase() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->name()) : "t";
  for (auto& c : test) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  name_ =
      "t_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + test.substr(0, 30);
  for (auto& c : name_) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  pqxx::connection admin(admin_url());
  pqxx::nontransaction tx(admin);
  tx.exec("CREATE DATABASE " + tx.quote_name(name_));
  url_ = with_database(admin_url(), name_);
}

TestDatabase::~TestDatabase() {
  try {
    pqxx::connection admin(admin_url());
    pqxx::nontransaction tx(admin);
    tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(name_) + " WITH (FORCE)");
  } catch (const std::exception& e) {
    fprintf(stderr, "warning: could not drop test database %s: %s\n", name_.c_str(), e.what());
  }
}

pqxx::result query(const std::string& url, const std::string& statement) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  auto r = tx.exec(statement);
  tx.commit();
  return r;
}

pqxx::result TestDatabase::sql(const std::string& statement) const {
  return query(url_, statement);
}

TestLogins::~TestLogins() {
  for (const auto& role : roles_) {
    try {
      db_.sql("DROP OWNED BY " + role);
      db_.sql("DROP ROLE " + role);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cannot drop test role " << role << ": " << e.what();
    }
  }
}

std::string TestLogins::login_as(const std::string& granted) {
  static std::atomic<int> counter{0};
  const std::string role = "t" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
                           granted.substr(granted.find('_') + 1);
  db_.sql("CREATE ROLE " + role + " LOGIN IN ROLE " + granted);
  roles_.push_back(role);
  const std::string& url = db_.url();
  const size_t start = url.find("://") + 3;
  return url.substr(0, start) + role + url.substr(url.find('@', start));
}

}  // namespace sqlstreams::testing
