// The ELF check of a private image (runtime/plugin_host/README.md#loading-step-by-step): before
// anything dlopens a plugin image, its ELF64 header and program headers are read from the sealed
// copy itself and checked against the copy's size and the host's class, byte order and machine.
// dlopen trusts the headers: a truncated file (a copy still in progress, a damaged download) whose
// PT_LOAD segments point past the end of the image was mapped, and the first touch of a page beyond
// the end killed the host with SIGBUS (at `run`, at SIGHUP and in `config check`). Only the headers
// are read (pread from the memfd); nothing of the plugin runs.
#include <elf.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {
namespace fs = std::filesystem;

namespace {

#if defined(__x86_64__)
constexpr Elf64_Half kHostMachine = EM_X86_64;
constexpr const char* kHostMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr Elf64_Half kHostMachine = EM_AARCH64;
constexpr const char* kHostMachineName = "AArch64";
#else
#error "plugin_host: add this machine's EM_* value"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kHostData = ELFDATA2LSB;
#else
constexpr unsigned char kHostData = ELFDATA2MSB;
#endif

std::string expected_text() {
  return fmt::format("a complete ELF shared object for this host (64-bit, {}-endian, {})",
                     kHostData == ELFDATA2LSB ? "little" : "big", kHostMachineName);
}

constexpr const char* kTruncatedHint =
    "the file is truncated or damaged (a copy still in progress?): install the whole .so the "
    "plugin build produced again, e.g. `install -m 0755 build/NAME.so PLUGIN_DIR/`";
constexpr const char* kForeignHint =
    "build the plugin for this host with sqlstreams_add_plugin against plugin-sdk";

[[noreturn]] void refuse_image(const fs::path& shown, const std::string& found, const char* hint) {
  throw PluginLoadError(shown.string(), "", expected_text(), found, hint);
}

// Reads exactly `len` bytes at `offset` of the image (the caller checked they lie inside it).
void read_at(const PluginImage& image, const fs::path& shown, uint64_t offset, void* out,
             size_t len) {
  auto* p = static_cast<char*>(out);
  while (len > 0) {
    const ssize_t n = ::pread(image.fd, p, len, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      refuse_image(shown,
                   fmt::format("a read of the private copy failed at byte {}: {}", offset,
                               n < 0 ? std::strerror(errno) : "end of file"),
                   "check the host's memory");
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
}

// [offset, offset + count * entry) inside [0, size), without overflow.
bool fits(uint64_t offset, uint64_t count, uint64_t entry, uint64_t size) {
  if (count != 0 && entry > size / count) return false;
  const uint64_t bytes = count * entry;
  return offset <= size && bytes <= size - offset;
}

const char* segment_type(Elf64_Word type) {
  switch (type) {
    case PT_LOAD:
      return "PT_LOAD";
    case PT_DYNAMIC:
      return "PT_DYNAMIC";
    case PT_INTERP:
      return "PT_INTERP";
    case PT_NOTE:
      return "PT_NOTE";
    case PT_TLS:
      return "PT_TLS";
    case PT_GNU_EH_FRAME:
      return "PT_GNU_EH_FRAME";
    case PT_GNU_RELRO:
      return "PT_GNU_RELRO";
    case PT_GNU_PROPERTY:
      return "PT_GNU_PROPERTY";
    default:
      return "segment";
  }
}

}  // namespace

void check_elf_image(const PluginImage& image, const fs::path& shown) {
  const uint64_t size = image.size;
  const std::string file_size = fmt::format("{}-byte file", size);
  if (size < sizeof(Elf64_Ehdr)) {
    refuse_image(
        shown,
        fmt::format("a {} (an ELF64 header alone takes {} bytes)", file_size, sizeof(Elf64_Ehdr)),
        kTruncatedHint);
  }
  Elf64_Ehdr eh{};
  read_at(image, shown, 0, &eh, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    refuse_image(shown, "a file without the ELF magic (it changed while loading)", kTruncatedHint);
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
    refuse_image(shown,
                 eh.e_ident[EI_CLASS] == ELFCLASS32
                     ? std::string("a 32-bit object")
                     : fmt::format("an ELF class {} object", eh.e_ident[EI_CLASS]),
                 kForeignHint);
  }
  if (eh.e_ident[EI_DATA] != kHostData) {
    refuse_image(shown,
                 eh.e_ident[EI_DATA] == ELFDATA2MSB ? std::string("a big-endian object")
                 : eh.e_ident[EI_DATA] == ELFDATA2LSB
                     ? std::string("a little-endian object")
                     : fmt::format("ELF data encoding {}", eh.e_ident[EI_DATA]),
                 kForeignHint);
  }
  if (eh.e_machine != kHostMachine) {
    refuse_image(shown, fmt::format("an object for ELF machine {}", eh.e_machine), kForeignHint);
  }
  if (eh.e_type != ET_DYN) {
    refuse_image(shown,
                 eh.e_type == ET_EXEC ? std::string("an executable, not a shared object")
                 : eh.e_type == ET_REL
                     ? std::string("a relocatable object (.o), not a shared object")
                     : fmt::format("ELF type {}, not a shared object", eh.e_type),
                 "link the plugin as a shared library with sqlstreams_add_plugin");
  }
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    refuse_image(shown,
                 fmt::format("{} program headers of {} bytes each (expected entries of {})",
                             eh.e_phnum, eh.e_phentsize, sizeof(Elf64_Phdr)),
                 kTruncatedHint);
  }
  if (!fits(eh.e_phoff, eh.e_phnum, eh.e_phentsize, size)) {
    refuse_image(
        shown,
        fmt::format("a program header table at byte {} ({} entries) past the end of the {}",
                    eh.e_phoff, eh.e_phnum, file_size),
        kTruncatedHint);
  }
  if (eh.e_shoff != 0 || eh.e_shnum != 0) {
    if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !fits(eh.e_shoff, eh.e_shnum, eh.e_shentsize, size)) {
      refuse_image(
          shown,
          fmt::format("a section header table at byte {} ({} entries of {} bytes) past the "
                      "end of the {}",
                      eh.e_shoff, eh.e_shnum, eh.e_shentsize, file_size),
          kTruncatedHint);
    }
  }
  std::vector<Elf64_Phdr> headers(eh.e_phnum);
  read_at(image, shown, eh.e_phoff, headers.data(), headers.size() * sizeof(Elf64_Phdr));
  bool loads = false;
  for (size_t i = 0; i < headers.size(); ++i) {
    const Elf64_Phdr& ph = headers[i];
    if (ph.p_type == PT_LOAD) loads = true;
    // Every segment's bytes in the file lie inside the image (PT_LOAD and PT_DYNAMIC above
    // all: dlopen maps and reads them).
    if (!fits(ph.p_offset, 1, ph.p_filesz, size)) {
      refuse_image(shown,
                   fmt::format("program header {} ({}) with bytes {}..{} past the end of the {}", i,
                               segment_type(ph.p_type), ph.p_offset,
                               ph.p_offset + ph.p_filesz /* may wrap: shown as read */, file_size),
                   kTruncatedHint);
    }
    if (ph.p_type == PT_LOAD && ph.p_memsz < ph.p_filesz) {
      refuse_image(
          shown,
          fmt::format("program header {} (PT_LOAD) with {} bytes in the file but {} in memory", i,
                      ph.p_filesz, ph.p_memsz),
          kTruncatedHint);
    }
  }
  if (!loads) refuse_image(shown, "no PT_LOAD segment", kTruncatedHint);
}

}  // namespace sqlstreams::plugin_host
