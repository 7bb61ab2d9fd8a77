// resolve_database_url(): SQLSTREAMS_DATABASE_URL wins, else the first line of url_file
// (relative to the config file's folder, a regular file of bounded size), else a ConfigError
// naming both. Parsing and masking the URL is store/conninfo's (tests/store/conninfo_test.cpp).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "config/text_file.hpp"

namespace sqlstreams::config {
namespace {

namespace fs = std::filesystem;

constexpr const char* kEnv = "SQLSTREAMS_DATABASE_URL";

// Sets (or unsets) the variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    if (const char* old = std::getenv(kEnv)) old_ = old;
    if (value) {
      setenv(kEnv, value, 1);
    } else {
      unsetenv(kEnv);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(kEnv, old_->c_str(), 1);
    } else {
      unsetenv(kEnv);
    }
  }

 private:
  std::optional<std::string> old_;
};

class DatabaseUrl : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sqlstreams-config-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "secrets");
    config_.path = dir_ / "host.toml";
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const fs::path& file, const std::string& text) {
    std::ofstream out(file);
    out << text;
  }

  fs::path dir_;
  Config config_;
};

TEST_F(DatabaseUrl, EnvironmentWinsOverUrlFile) {
  write(dir_ / "secrets/db.url", "postgresql://file@localhost/db\n");
  config_.database.url_file = "secrets/db.url";
  ScopedEnv env("postgresql://env@localhost/db");
  EXPECT_EQ(resolve_database_url(config_), "postgresql://env@localhost/db");
}

TEST_F(DatabaseUrl, UrlFileRelativeToConfigFolderFirstLineTrimmed) {
  write(dir_ / "secrets/db.url", "  postgresql://app:s3cret@localhost:5432/db \r\nsecond line\n");
  config_.database.url_file = "secrets/db.url";
  ScopedEnv env(nullptr);
  EXPECT_EQ(resolve_database_url(config_), "postgresql://app:s3cret@localhost:5432/db");
}

TEST_F(DatabaseUrl, AbsoluteUrlFile) {
  write(dir_ / "abs.url", "host=/tmp dbname=x");
  config_.database.url_file = (dir_ / "abs.url").string();
  ScopedEnv env("");  // empty counts as unset
  EXPECT_EQ(resolve_database_url(config_), "host=/tmp dbname=x");
}

TEST_F(DatabaseUrl, NeitherIsAnErrorNamingBoth) {
  ScopedEnv env(nullptr);
  try {
    resolve_database_url(config_);
    FAIL() << "resolved";
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("SQLSTREAMS_DATABASE_URL"), std::string::npos) << text;
    EXPECT_NE(text.find("database.url_file"), std::string::npos) << text;
    EXPECT_NE(text.find("host.toml"), std::string::npos) << text;
  }
}

TEST_F(DatabaseUrl, UnreadableUrlFileIsAnError) {
  config_.database.url_file = "secrets/missing.url";
  ScopedEnv env(nullptr);
  try {
    resolve_database_url(config_);
    FAIL() << "resolved";
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("missing.url"), std::string::npos) << text;
    EXPECT_NE(text.find("SQLSTREAMS_DATABASE_URL"), std::string::npos) << text;
  }
}

TEST_F(DatabaseUrl, EmptyUrlFileIsAnErrorThatDoesNotLeakTheRest) {
  write(dir_ / "secrets/db.url", "\npostgresql://app:s3cret@localhost/db\n");
  config_.database.url_file = "secrets/db.url";
  ScopedEnv env(nullptr);
  try {
    resolve_database_url(config_);
    FAIL() << "resolved";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("is empty"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
  }
}

// Regression (docs/operating/security.md#secrets-and-configuration): /dev/zero as url_file
// exhausted memory (getline never finds a newline).
TEST_F(DatabaseUrl, DevZeroIsRefusedWithoutReadingIt) {
  config_.database.url_file = "/dev/zero";
  ScopedEnv env(nullptr);
  try {
    resolve_database_url(config_);
    FAIL() << "resolved";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/zero: cannot read database.url_file: it is a "
                                         "character device, not a regular file"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(DatabaseUrl, FifoAndDirectoryAreRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  ScopedEnv env(nullptr);
  for (const char* name : {"fifo", "secrets"}) {
    config_.database.url_file = name;
    try {
      resolve_database_url(config_);
      FAIL() << "resolved " << name;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
}

TEST_F(DatabaseUrl, OversizedUrlFileIsRefused) {
  write(dir_ / "secrets/db.url",
        "postgresql://app:s3cret@localhost/db" + std::string(kMaxUrlFileBytes, ' ') + "\n");
  config_.database.url_file = "secrets/db.url";
  ScopedEnv env(nullptr);
  try {
    resolve_database_url(config_);
    FAIL() << "resolved";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("larger than 65536 bytes"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sqlstreams::config
