// STYLE R4(a): plugin.h is hashed and compared with plugin-sdk/ABI_SHA256, so the ABI cannot
// change without someone updating the hash — and, with it, the version and CHANGES.md.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "sha256.hpp"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AbiHash, Sha256MatchesKnownVectors) {
  EXPECT_EQ(sdk_test::sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sdk_test::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sdk_test::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(AbiHash, PluginHeaderMatchesRecordedHash) {
  const std::string actual = sdk_test::sha256_hex(read_file(SQLSTREAMS_ABI_HEADER));
  std::string recorded = read_file(SQLSTREAMS_ABI_SHA256_FILE);
  recorded = recorded.substr(0, recorded.find_first_of(" \t\r\n"));
  EXPECT_EQ(actual, recorded)
      << "plugin-sdk/include/sqlstreams/plugin.h changed. If the change is intended: bump "
         "SQLSTREAMS_ABI_MINOR (append-only change) or SQLSTREAMS_ABI_MAJOR (anything else), "
         "add an entry to plugin-sdk/CHANGES.md, then write the new hash with\n"
         "  sha256sum plugin-sdk/include/sqlstreams/plugin.h > plugin-sdk/ABI_SHA256";
}

}  // namespace
