// sqlstreams/elf_symbols.hpp — why a plugin file lacks the exported entry function, read from
// its ELF symbol tables (.dynsym and .symtab) without loading it: a C++-mangled symbol that
// demangles to the entry's name (a missing extern "C") or the entry present but not exported
// (hidden visibility, local binding: a version script or -fvisibility without
// SQLSTREAMS_EXPORT). Header-only, no dependency but <elf.h> and <cxxabi.h>; 64-bit ELF of the
// host's byte order only (anything else reads as "nothing found"). Used by manifest_check.hpp.
// Threading: a pure function of the file's bytes.
#pragma once

#include <elf.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

namespace sqlstreams::elf_symbols {

// What the symbol tables say about function `name`.
struct EntryClues {
  std::string mangled;    // a C++ symbol whose function name is `name` (e.g. "_ZN1x...Ev")
  std::string demangled;  // its demangled form, "x::sqlstreams_plugin_manifest_v1()"
  bool present_not_exported = false;  // `name` is defined, but local or hidden
};

namespace detail {

inline std::string demangle(const char* symbol) {
#if __has_include(<cxxabi.h>)
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(symbol, nullptr, nullptr, &status),
                                           std::free);
  if (status == 0 && d) return d.get();
#endif
  return "";
}

// True when the demangled function's unqualified name is `name`: "name(" at the start or
// after "::" (return types are not part of a function's mangled name).
inline bool names_function(const std::string& demangled, const std::string& name) {
  const std::string call = name + "(";
  for (size_t at = demangled.find(call); at != std::string::npos;
       at = demangled.find(call, at + 1)) {
    if (at == 0 || (at >= 2 && demangled.compare(at - 2, 2, "::") == 0)) return true;
  }
  return false;
}

}  // namespace detail

// Reads the ELF file at `path`; a file that cannot be read or parsed gives empty clues.
inline EntryClues find_entry_clues(const std::string& path, const std::string& name) {
  EntryClues clues;
  std::ifstream in(path, std::ios::binary);
  if (!in) return clues;
  constexpr size_t kMaxBytes = size_t{512} << 20;  // no plugin is larger; never read more
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof(Elf64_Ehdr) || bytes.size() > kMaxBytes) return clues;
  const char* base = bytes.data();
  Elf64_Ehdr eh;
  std::memcpy(&eh, base, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > bytes.size() ||
      eh.e_shnum > (bytes.size() - eh.e_shoff) / sizeof(Elf64_Shdr)) {
    return clues;
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (eh.e_shnum > 0)
    std::memcpy(sections.data(), base + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  auto in_file = [&](uint64_t off, uint64_t size) {
    return off <= bytes.size() && size <= bytes.size() - off;
  };
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
    if (sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    if (!in_file(sh.sh_offset, sh.sh_size) || !in_file(strtab.sh_offset, strtab.sh_size)) continue;
    const char* strings = base + strtab.sh_offset;
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= sh.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, base + sh.sh_offset + off, sizeof sym);
      if (sym.st_name >= strtab.sh_size || sym.st_shndx == SHN_UNDEF) continue;
      const char* s = strings + sym.st_name;
      const size_t len = strnlen(s, strtab.sh_size - sym.st_name);
      if (len == strtab.sh_size - sym.st_name) continue;  // not NUL-terminated inside the table
      const std::string symbol(s, len);
      if (symbol == name) {
        const bool local = ELF64_ST_BIND(sym.st_info) == STB_LOCAL;
        const bool hidden = ELF64_ST_VISIBILITY(sym.st_other) != STV_DEFAULT &&
                            ELF64_ST_VISIBILITY(sym.st_other) != STV_PROTECTED;
        if (local || hidden) clues.present_not_exported = true;
      } else if (clues.mangled.empty() && symbol.rfind("_Z", 0) == 0 &&
                 symbol.find(name) != std::string::npos) {
        const std::string d = detail::demangle(symbol.c_str());
        if (detail::names_function(d, name)) {
          clues.mangled = symbol;
          clues.demangled = d;
        }
      }
    }
  }
  return clues;
}

}  // namespace sqlstreams::elf_symbols
