// The ELF check of a plugin's private image (runtime/plugin_host/README.md#loading-step-by-step): a
// truncated or malformed `.so` whose ELF magic is intact (a copy still in progress, a damaged
// download) is refused with a located error before any dlopen. dlopen would map PT_LOAD segments
// that point past the end of the sealed image and the first touch of those pages killed the host
// with SIGBUS.
#include <elf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "test_support.hpp"
#include "text.hpp"

namespace {

namespace fs = std::filesystem;
using plugin_host_test::kPluginDir;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;
using sqlstreams::testing::read_file;

class ElfImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sqlstreams-elf-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::permissions(dir_, fs::perms(0755));
    good_ = read_file(kPluginDir + "/payments.so");
    ASSERT_GT(good_.size(), 8192u);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `bytes` as plugin_dir/<name> with mode 0755.
  void write_plugin(const std::string& name, const std::string& bytes) {
    {
      std::ofstream out(dir_ / name, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    ::chmod((dir_ / name).c_str(), 0755);
  }
  // The refusal of loading `name`, or "" when it loaded.
  std::string refusal(const std::string& name) {
    PluginRegistry registry(dir_);
    try {
      registry.load(name);
    } catch (const PluginLoadError& e) {
      EXPECT_EQ(e.path(), (dir_ / name).string());
      EXPECT_FALSE(e.hint().empty());
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  std::string good_;
};

class TruncatedPlugin : public ElfImageTest, public ::testing::WithParamInterface<std::string> {
 protected:
  size_t cut() const {
    const std::string& where = GetParam();
    if (where == "after_header") return sizeof(Elf64_Ehdr);
    if (where == "after_program_headers") return 1024;
    if (where == "mid_text") return good_.size() / 2;
    if (where == "last_page") return good_.size() - 4096 + 100;
    return good_.size() - 1;  // one byte short
  }
};

TEST_P(TruncatedPlugin, IsRefusedBeforeDlopenNeverSigbus) {
  write_plugin("payments.so", good_.substr(0, cut()));
  const std::string what = refusal("payments.so");
  ASSERT_FALSE(what.empty()) << "a truncated plugin loaded";
  EXPECT_NE(what.find("a complete ELF shared object"), std::string::npos) << what;
  EXPECT_NE(what.find(std::to_string(cut()) + "-byte file"), std::string::npos) << what;
  EXPECT_NE(what.find("truncated"), std::string::npos) << what;
  EXPECT_EQ(what.find("/proc/"), std::string::npos) << what;
}

INSTANTIATE_TEST_SUITE_P(Offsets, TruncatedPlugin,
                         ::testing::Values("after_header", "after_program_headers", "mid_text",
                                           "last_page", "one_byte_short"),
                         [](const auto& p) { return p.param; });

TEST_F(ElfImageTest, TheWholeFileStillLoads) {
  write_plugin("payments.so", good_);
  EXPECT_EQ(refusal("payments.so"), "");
}

TEST_F(ElfImageTest, AnObjectForAnotherClassOrMachineIsRefusedByName) {
  std::string bytes = good_;
  bytes[EI_CLASS] = ELFCLASS32;
  write_plugin("class32.so", bytes);
  std::string what = refusal("class32.so");
  EXPECT_NE(what.find("32-bit"), std::string::npos) << what;

  bytes = good_;
  bytes[EI_DATA] = ELFDATA2MSB;
  write_plugin("big_endian.so", bytes);
  what = refusal("big_endian.so");
  EXPECT_NE(what.find("big-endian"), std::string::npos) << what;

  bytes = good_;
  Elf64_Half machine = EM_S390;
  std::memcpy(bytes.data() + offsetof(Elf64_Ehdr, e_machine), &machine, sizeof machine);
  write_plugin("s390.so", bytes);
  what = refusal("s390.so");
  EXPECT_NE(what.find("machine 22"), std::string::npos) << what;
}

TEST_F(ElfImageTest, ProgramHeadersOutsideTheFileAreRefused) {
  std::string bytes = good_;
  Elf64_Off phoff = bytes.size() - 8;
  std::memcpy(bytes.data() + offsetof(Elf64_Ehdr, e_phoff), &phoff, sizeof phoff);
  write_plugin("phoff.so", bytes);
  std::string what = refusal("phoff.so");
  EXPECT_NE(what.find("program header table"), std::string::npos) << what;

  bytes = good_;
  Elf64_Off huge = ~Elf64_Off{0} - 16;  // an offset + size that wraps around
  std::memcpy(bytes.data() + offsetof(Elf64_Ehdr, e_shoff), &huge, sizeof huge);
  write_plugin("shoff.so", bytes);
  what = refusal("shoff.so");
  EXPECT_NE(what.find("section header table"), std::string::npos) << what;
}

}  // namespace
