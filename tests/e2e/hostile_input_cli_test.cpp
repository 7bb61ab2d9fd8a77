// docs/operating/security.md#secrets-and-configuration, through the real binary: the
// connection-string matrix libpq used to echo with the password (refused by `config check`, `run`,
// `status` and `migrate` from the flag, the environment and url_file, with no trace of the
// password), good URLs with passwords that work and stay masked, the schema name checked at every
// entry, and a role holding the migrations' advisory lock named after a bounded wait.
#include <gtest/gtest.h>

#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

const std::vector<std::string> kFragments = {"Pw9x", "QzK7"};

void expect_no_secret(const std::string& out, const std::string& what) {
  for (const auto& f : kFragments) {
    EXPECT_EQ(out.find(f), std::string::npos) << what << " printed '" << f << "':\n" << out;
  }
}

// "postgresql://postgres@127.0.0.1:5432/db" → {"127.0.0.1:5432", "db"}.
std::pair<std::string, std::string> host_and_db(const std::string& url) {
  const size_t at = url.find('@'), slash = url.find('/', at);
  return {url.substr(at + 1, slash - at - 1), url.substr(slash + 1)};
}

std::string config_with_database(const ScratchDir& dir, const std::string& database_lines) {
  const std::string file = dir.file("host.toml");
  std::ofstream(file) << "[database]\n" << database_lines << "\n" << host_config(HostOptions{});
  return file;
}

class HostileInputCli : public ::testing::Test {
 protected:
  std::string host() const { return host_and_db(db_.url()).first; }
  std::string dbname() const { return host_and_db(db_.url()).second; }
  testing::TestDatabase db_;
  ScratchDir dir_;
};

TEST_F(HostileInputCli, TheSecretMatrixIsRefusedEverywhereWithoutPrintingThePassword) {
  const std::string tail = "@" + host() + "/" + dbname();
  const std::vector<std::string> bad = {
      "postgresql://postgres:Pw9x/QzK7" + tail,           // unencoded '/'
      "postgresql://postgres:Pw9x@QzK7" + tail,           // unencoded '@'
      "postgresql://postgres:Pw9x%zQzK7" + tail,          // bad percent-encoding
      "postgresql://postgres:Pw9xQzK7@[::1/" + dbname(),  // broken IPv6 bracket
      "Pw9xQzK7",                                         // a url_file holding only a password
      "host=127.0.0.1 password='Pw9x\\'QzK7",             // escaped quote, then unterminated
  };
  for (const std::string& url : bad) {
    SCOPED_TRACE(url);
    for (const auto& cmd : {std::vector<std::string>{"migrate", "--database-url", url},
                            std::vector<std::string>{"status", "--database-url", url}}) {
      auto [code, out] = cli(cmd);
      EXPECT_EQ(code, 64) << out;
      EXPECT_NE(out.find("--database-url: "), std::string::npos) << out;
      expect_no_secret(out, cmd[0]);
    }
    auto [env_code, env_out] = cli({"migrate"}, url);
    EXPECT_EQ(env_code, 64) << env_out;
    EXPECT_NE(env_out.find("SQLSTREAMS_DATABASE_URL: "), std::string::npos) << env_out;
    expect_no_secret(env_out, "migrate (environment)");

    std::ofstream(dir_.file("db.url")) << url << "\n";
    const std::string config = config_with_database(dir_, "url_file = \"db.url\"");
    for (const auto& cmd : {std::vector<std::string>{"config", "check", config, "--plugin-dir",
                                                     SQLSTREAMS_PLUGIN_DIR},
                            std::vector<std::string>{"run", "--config", config, "--plugin-dir",
                                                     SQLSTREAMS_PLUGIN_DIR},
                            std::vector<std::string>{"migrate", "--config", config},
                            std::vector<std::string>{"status", "--config", config}}) {
      auto [code, out] = cli(cmd);
      EXPECT_EQ(code, 2) << out;
      EXPECT_NE(out.find("database.url_file (first line of " + dir_.file("db.url")),
                std::string::npos)
          << out;
      expect_no_secret(out, cmd[0]);
    }
  }
}

TEST_F(HostileInputCli, UrlsWithPasswordsWorkAndPrintOnlyMaskedParts) {
  const std::string tail = "@" + host() + "/" + dbname();
  const size_t colon = host().find(':');
  const std::string kv = "host=" + host().substr(0, colon) + " port=" + host().substr(colon + 1) +
                         " dbname=" + dbname() + " user=postgres password='Pw9x\\'QzK7'";
  const std::vector<std::string> good = {"POSTGRESQL://postgres:Pw9xQzK7" + tail,
                                         "postgresql://postgres:Pw9x%2FQzK7" + tail, kv};
  for (const std::string& url : good) {
    SCOPED_TRACE(url);
    auto [code, out] = cli({"migrate", "--database-url", url});
    EXPECT_EQ(code, 0) << out;
    expect_no_secret(out, "migrate");
    auto [status_code, status_out] = cli({"status"}, url);
    EXPECT_EQ(status_code, 0) << status_out;
    expect_no_secret(status_out, "status");
    std::ofstream(dir_.file("db.url")) << url << "\n";
    const std::string config = config_with_database(dir_, "url_file = \"db.url\"");
    auto [check_code, check_out] =
        cli({"config", "check", config, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
    EXPECT_EQ(check_code, 0) << check_out;
    expect_no_secret(check_out, "config check");
  }
  // Unreachable: the error names the masked parts only; PGPASSWORD is never printed either.
  auto [code, out] =
      cli({"migrate", "--database-url", "postgresql://postgres:Pw9xQzK7@127.0.0.1:1/x"});
  EXPECT_EQ(code, 4) << out;
  EXPECT_NE(out.find("cannot connect to host=127.0.0.1 port=1 dbname=x user=postgres password=***"),
            std::string::npos)
      << out;
  expect_no_secret(out, "migrate (unreachable)");
  auto [pg_code, pg_out] = testing::run_command(
      {SQLSTREAMS_BINARY, "migrate", "--database-url", "postgresql://postgres@127.0.0.1:1/x"},
      {{"PGPASSWORD", "Pw9xQzK7"}});
  EXPECT_EQ(pg_code, 4) << pg_out;
  expect_no_secret(pg_out, "migrate (PGPASSWORD)");
}

TEST_F(HostileInputCli, SchemaNameIsCheckedAtEveryEntryPoint) {
  auto [code, out] = cli({"migrate", "--database-url", db_.url(), "--schema", "it's"});
  EXPECT_EQ(code, 64) << out;
  EXPECT_NE(out.find("--schema: invalid SQL identifier"), std::string::npos) << out;
  EXPECT_NE(out.find(R"((got "it's"))"), std::string::npos) << out;
  auto [code2, out2] = cli({"status", "--schema", "x\"; DROP SCHEMA public; --"}, db_.url());
  EXPECT_EQ(code2, 64) << out2;
  const std::string config = config_with_database(dir_, "schema = \"it's\"");
  auto [code3, out3] = cli({"migrate", "--config", config}, db_.url());
  EXPECT_EQ(code3, 2) << out3;
  EXPECT_NE(out3.find("database.schema: invalid SQL identifier"), std::string::npos) << out3;
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM pg_namespace WHERE nspname LIKE '%''%' "
                                "OR nspname LIKE '%\"%'"),
            0);
}

TEST_F(HostileInputCli, MigrateAndRunNameTheRoleHoldingTheAdvisoryLock) {
  const std::string role = "sqls_blocker_" + std::to_string(::getpid());
  db_.sql("DROP ROLE IF EXISTS " + role);
  db_.sql("CREATE ROLE " + role + " LOGIN");
  {
    // Any role can take the lock: this one has no privilege on anything of SQLStreams.
    pqxx::connection blocker("postgresql://" + role + "@" + host() + "/" + dbname());
    pqxx::nontransaction tx(blocker);
    const auto pid = tx.exec1("SELECT pg_backend_pid()")[0].as<int64_t>();
    tx.exec("SELECT pg_advisory_lock(hashtext('sqlstreams.migrate'))");

    auto [code, out] = cli({"migrate", "--database-url", db_.url(), "--lock-timeout", "1s"});
    EXPECT_EQ(code, 4) << out;
    EXPECT_NE(out.find("gave up after waiting 1s for the migrations lock"), std::string::npos)
        << out;
    EXPECT_NE(out.find("held by pid " + std::to_string(pid) + " (role " + role), std::string::npos)
        << out;

    const std::string config = config_with_database(dir_, "migrate_lock_timeout = \"1s\"");
    auto [run_code, run_out] =
        cli({"run", "--config", config, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR}, db_.url());
    EXPECT_EQ(run_code, 4) << run_out;
    EXPECT_NE(run_out.find("held by pid " + std::to_string(pid) + " (role " + role),
              std::string::npos)
        << run_out;

    auto [bad_code, bad_out] =
        cli({"migrate", "--database-url", db_.url(), "--lock-timeout", "100000000000d"});
    EXPECT_EQ(bad_code, 64) << bad_out;
    tx.exec("SELECT pg_advisory_unlock(hashtext('sqlstreams.migrate'))");
  }
  auto [code, out] = cli({"migrate", "--database-url", db_.url(), "--lock-timeout", "1s"});
  EXPECT_EQ(code, 0) << out;
  db_.sql("DROP ROLE " + role);
}

}  // namespace
}  // namespace sqlstreams::e2e
