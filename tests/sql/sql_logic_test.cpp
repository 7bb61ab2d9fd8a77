// tests/sql — the SQL surface as data: a small sqllogictest-style runner over tests/sql/*.test,
// each file run top to bottom on its own copy of the migrated template database
// (CONTRIBUTING.md#tests). Records, separated by blank lines ('#' lines are comments):
//   connect <role>          later records run as <role> (SET ROLE on a fresh connection of the
//                           test's superuser; `connect superuser` goes back). The roles are the
//                           migrations' NOLOGIN roles: sqlstreams_producer, _operator, _host.
//   statement ok            the SQL (the lines up to the blank line) must succeed
//   statement error <CODE>  it must fail with SQLSTATE <CODE> (e.g. 42501, 22001); text after
//                           the code must appear in the error's message
//   query                   the SQL, a line `----`, then the expected rows, one per line, columns
//                           joined by " | ", NULL as "NULL" (order as the query returns them:
//                           say ORDER BY)
// Every statement runs in autocommit. A failure names the file and line of its record.
#include <gtest/gtest.h>

#include <fstream>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <vector>

#include "test_database.hpp"

namespace sqlstreams::testing {
namespace {

struct Record {
  int line = 0;
  std::string kind;  // connect, ok, error, query
  std::string arg;   // the role, or the SQLSTATE
  std::string text;  // statement error: what the message must contain ("" for anything)
  std::string sql;
  std::vector<std::string> rows;
};

std::vector<Record> parse(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<Record> out;
  std::vector<std::pair<int, std::string>> block;
  auto flush = [&] {
    if (block.empty()) return;
    Record r;
    r.line = block[0].first;
    std::istringstream head(block[0].second);
    std::string word;
    head >> word;
    if (word == "connect") {
      r.kind = "connect";
      head >> r.arg;
    } else if (word == "statement") {
      head >> word;
      if (word == "error") {
        head >> r.arg;
        std::getline(head >> std::ws, r.text);
      }
      r.kind = word;
    } else if (word == "query") {
      r.kind = "query";
    }
    if (r.kind.empty() ||
        (r.kind != "ok" && r.kind != "error" && r.kind != "query" && r.kind != "connect") ||
        ((r.kind == "connect" || r.kind == "error") && r.arg.empty())) {
      throw std::runtime_error(path + ":" + std::to_string(r.line) + ": cannot read record '" +
                               block[0].second + "'");
    }
    bool results = false;
    for (size_t i = 1; i < block.size(); ++i) {
      if (r.kind == "query" && block[i].second == "----") {
        results = true;
      } else if (results) {
        r.rows.push_back(block[i].second);
      } else {
        r.sql += block[i].second + "\n";
      }
    }
    if (r.kind != "connect" && r.sql.empty()) {
      throw std::runtime_error(path + ":" + std::to_string(r.line) + ": a record without SQL");
    }
    if (r.kind == "query" && !results) {
      throw std::runtime_error(path + ":" + std::to_string(r.line) + ": a query without ----");
    }
    out.push_back(std::move(r));
    block.clear();
  };
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (!line.empty() && line[0] == '#') continue;
    if (line.find_first_not_of(" \t") == std::string::npos) {
      flush();
      continue;
    }
    block.emplace_back(n, line);
  }
  flush();
  return out;
}

std::string row_text(const pqxx::row& row) {
  std::string out;
  for (pqxx::row::size_type i = 0; i < row.size(); ++i) {
    if (i > 0) out += " | ";
    out += row[i].is_null() ? "NULL" : row[i].c_str();
  }
  return out;
}

// libpqxx 6.4 throws some errors as their own class without the SQLSTATE (sqlstate() is "");
// those classes are mapped back here, and any other is named so that it can be added.
std::string sqlstate_of(const pqxx::sql_error& e) {
  if (!e.sqlstate().empty()) return e.sqlstate();
  if (dynamic_cast<const pqxx::insufficient_privilege*>(&e) != nullptr) return "42501";
  return "(unknown: libpqxx lost this error's SQLSTATE; map its class in sqlstate_of)";
}

class SqlLogicTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SqlLogicTest, Runs) {
  const std::string path = std::string(SQLSTREAMS_SOURCE_DIR) + "/tests/sql/" + GetParam();
  const auto records = parse(path);
  ASSERT_FALSE(records.empty()) << path;
  TestDatabase db(TestDatabase::Schema::kMigrated);
  auto conn = std::make_unique<pqxx::connection>(db.url());
  for (const auto& r : records) {
    const std::string where = GetParam() + ":" + std::to_string(r.line);
    if (r.kind == "connect") {
      conn = std::make_unique<pqxx::connection>(db.url());
      if (r.arg != "superuser")
        pqxx::nontransaction(*conn).exec("SET ROLE " + conn->quote_name(r.arg));
      continue;
    }
    try {
      pqxx::nontransaction tx(*conn);
      const pqxx::result result = tx.exec(r.sql);
      if (r.kind == "error") {
        ADD_FAILURE() << where << ": expected SQLSTATE " << r.arg << ", the statement succeeded:\n"
                      << r.sql;
      } else if (r.kind == "query") {
        std::vector<std::string> got;
        for (const auto& row : result) got.push_back(row_text(row));
        EXPECT_EQ(got, r.rows) << where << ":\n" << r.sql;
      }
    } catch (const pqxx::sql_error& e) {
      const std::string code = sqlstate_of(e);
      if (r.kind != "error") {
        ADD_FAILURE() << where << ": failed with SQLSTATE " << code << ": " << e.what() << r.sql;
      } else if (code != r.arg) {
        ADD_FAILURE() << where << ": expected SQLSTATE " << r.arg << ", got " << code << ": "
                      << e.what() << r.sql;
      } else if (std::string(e.what()).find(r.text) == std::string::npos) {
        ADD_FAILURE() << where << ": expected a message with '" << r.text << "', got: " << e.what()
                      << r.sql;
      }
    }
  }
}

// Every file of tests/sql, listed (a new file must be added here to run).
INSTANTIATE_TEST_SUITE_P(Files, SqlLogicTest,
                         ::testing::Values("privileges.test", "produce_limits.test",
                                           "stream_family.test"),
                         [](const ::testing::TestParamInfo<std::string>& file) {
                           std::string name = file.param.substr(0, file.param.find('.'));
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace sqlstreams::testing
