// A plugin's private image (runtime/plugin_host/README.md#loading-step-by-step): the host never
// maps the file on disk. `cp new.so plugin.so` rewrites the very inode a dlopen would have mapped,
// so the running code changed under the host (SIGBUS/SIGSEGV). Instead the checked file is read
// once into a sealed memfd (no write, grow, shrink or further sealing possible) and dlopen maps
// that copy through /proc/<pid>/fd/<n>. Whatever happens to the file afterwards (cp, mv, install,
// rm) cannot touch the running code; a SIGHUP compares the file's SHA-256 with the image's to see
// whether it changed (PluginRegistry::refresh). A handler process maps the host's image itself,
// inherited as a file descriptor (adopt_sealed_image: the seals and the SHA-256 are checked), never
// the file. The memfd stays open for the life of the process: glibc knows a loaded library by the
// path it was opened with, so a closed and reused descriptor number would make a later dlopen of
// the same path return the old library.
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "common/unique_fd.hpp"
#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {
namespace fs = std::filesystem;

namespace {

// Far above any real plugin; keeps a runaway file from filling memory.
constexpr off_t kMaxPluginBytes = off_t{1} << 30;

[[noreturn]] void fail(const fs::path& path, const std::string& expected, const std::string& found,
                       const std::string& hint) {
  throw PluginLoadError(path.string(), "", expected, found, hint);
}

std::string errno_text(int err) { return std::strerror(err); }

std::string to_hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 0xf];
  }
  return out;
}

bool write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    const ssize_t n = ::write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

PluginImage copy_plugin_image(const fs::path& real) {
  UniqueFd file(::open(real.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (file.get() < 0) {
    const int err = errno;
    fail(real, "a readable plugin file", errno_text(err), "check the file's permissions");
  }
  // The bytes read are those of this inode: check it as plugin_trust checked the path.
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    fail(real, "a regular file", "something else (it changed while loading)",
         "point the group's `plugin` at the plugin's .so file");
  }
  if ((st.st_uid != 0 && st.st_uid != ::geteuid()) || (st.st_mode & 022u) != 0) {
    fail(real, "a file owned by root or the host's user and writable only by its owner",
         fmt::format("uid {} mode {:04o} (it changed while loading)", st.st_uid,
                     st.st_mode & 07777u),
         "install plugins with `install -m 0755`");
  }
  if (st.st_size > kMaxPluginBytes) {
    fail(real, fmt::format("a plugin of at most {} bytes", kMaxPluginBytes),
         fmt::format("{} bytes", st.st_size), "point the group's `plugin` at the plugin's .so");
  }
  const std::string memfd_name = "sqlstreams-plugin:" + real.filename().string();
  UniqueFd image(::memfd_create(memfd_name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (image.get() < 0) {
    const int err = errno;
    fail(real, "a private in-memory copy of the plugin (memfd_create)", errno_text(err),
         "the host needs Linux 3.17 or later and memory for the copy");
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!sha || EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr) != 1) {
    fail(real, "a SHA-256 context", "OpenSSL refused to create one", "check libssl3");
  }
  std::array<char, 1 << 16> buf{};
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(file.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      fail(real, "a readable plugin file", errno_text(err), "check the file and the disk");
    }
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    if (total > static_cast<uint64_t>(kMaxPluginBytes)) {
      fail(real, "a file that stops growing while it is read", "more bytes than its size",
           "replace plugins atomically: `install -m 0755 new.so plugin_dir/`");
    }
    EVP_DigestUpdate(sha.get(), buf.data(), static_cast<size_t>(n));
    if (!write_all(image.get(), buf.data(), static_cast<size_t>(n))) {
      const int err = errno;
      fail(real, "a private in-memory copy of the plugin", errno_text(err),
           "the host needs memory for a copy of each plugin");
    }
  }
  constexpr int kSeals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
  if (::fcntl(image.get(), F_ADD_SEALS, kSeals) != 0) {
    const int err = errno;
    fail(real, "a sealed private copy of the plugin", errno_text(err),
         "the host needs Linux 3.17 or later");
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int digest_len = 0;
  EVP_DigestFinal_ex(sha.get(), digest.data(), &digest_len);
  PluginImage out;
  out.sha256 = to_hex(digest.data(), digest_len);
  out.size = total;
  out.fd = image.release();
  out.load_path = fmt::format("/proc/{}/fd/{}", ::getpid(), out.fd);
  return out;
}

PluginImage adopt_sealed_image(int fd, const fs::path& shown_path,
                               const std::string& expected_sha256) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    fail(shown_path, fmt::format("the host's sealed plugin image on fd {}", fd),
         "no such file descriptor (or not a file)",
         "handler processes are started by `sqlstreams run`, never by hand");
  }
  constexpr int kNeeded = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kNeeded) != kNeeded) {
    fail(shown_path, "a sealed image (write, grow and shrink sealed)",
         seals < 0 ? std::string("an unsealable file") : fmt::format("seals {:#x}", seals),
         "handler processes are started by `sqlstreams run`, never by hand");
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!sha || EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr) != 1) {
    fail(shown_path, "a SHA-256 context", "OpenSSL refused to create one", "check libssl3");
  }
  std::array<char, 1 << 16> buf{};
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(total));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      fail(shown_path, "a readable sealed image", errno_text(err), "");
    }
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    EVP_DigestUpdate(sha.get(), buf.data(), static_cast<size_t>(n));
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int digest_len = 0;
  EVP_DigestFinal_ex(sha.get(), digest.data(), &digest_len);
  const std::string got = to_hex(digest.data(), digest_len);
  if (got != expected_sha256) {
    fail(shown_path, "the image the host checked and runs (sha256 " + expected_sha256 + ")",
         "an image with sha256 " + got,
         "a handler process maps only the host's own sealed copy; restart the host, and report "
         "this if it happens again");
  }
  PluginImage out;
  out.fd = fd;
  out.sha256 = got;
  out.size = total;
  out.load_path = fmt::format("/proc/{}/fd/{}", ::getpid(), fd);
  return out;
}

void discard_plugin_image(PluginImage& image) {
  if (image.fd >= 0) ::close(image.fd);
  image.fd = -1;
}

}  // namespace sqlstreams::plugin_host
