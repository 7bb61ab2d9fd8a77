// Bounded file reading and the TOML nesting pre-scan (see text_file.hpp).
#include "config/text_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/unique_fd.hpp"
#include "config/config.hpp"

namespace sqlstreams::config {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string read_text_file(const std::filesystem::path& file, size_t max_bytes,
                           std::string_view what) {
  const std::string prefix = file.string() + ": cannot read " + std::string(what) + ": ";
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it right after.
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) throw ConfigError({prefix + std::strerror(errno)});
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw ConfigError({prefix + std::strerror(errno)});
  if (!S_ISREG(st.st_mode)) {
    throw ConfigError({prefix + "it is " + kind_of(st.st_mode) + ", not a regular file"});
  }
  const std::string too_large =
      prefix + "larger than " + std::to_string(max_bytes) + " bytes, the limit for this file";
  if (static_cast<uint64_t>(st.st_size) > max_bytes) throw ConfigError({too_large});
  std::string text;
  text.resize(max_bytes + 1);  // one byte more than allowed: detects a file that grew
  size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError({prefix + std::strerror(errno)});
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  if (used > max_bytes) throw ConfigError({too_large});
  text.resize(used);
  return text;
}

namespace {

// One pass over TOML text, tracking strings, comments, table headers, dotted keys and the
// brackets of values. Depth = header parts + dotted key parts + enclosing arrays / inline tables.
class DepthScanner {
 public:
  explicit DepthScanner(std::string_view text) : s_(text) {}

  std::string run() {
    while (i_ < s_.size() && error_.empty()) step();
    return error_;
  }

 private:
  enum class Mode { kLineStart, kKey, kValue };

  char peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }

  void advance() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }

  void fail(std::string_view what) {
    error_ = std::to_string(line_) + ":" + std::to_string(col_) + ": " + std::string(what) +
             " nests deeper than " + std::to_string(kMaxTomlDepth) +
             " levels (table headers, dotted key parts, arrays and inline tables count); "
             "flatten it";
  }

  int base() const { return frames_.empty() ? header_depth_ : frames_.back().depth; }

  // Skips a basic or literal string, single- or multi-line, starting at the quote.
  void skip_string() {
    const char q = peek();
    const bool multi = peek(1) == q && peek(2) == q;
    for (int k = 0; k < (multi ? 3 : 1); ++k) advance();
    while (i_ < s_.size()) {
      const char c = peek();
      if (c == '\\' && q == '"') {
        advance();
        if (i_ < s_.size()) advance();
        continue;
      }
      if (c == '\n' && !multi) return;  // unterminated: toml++ reports it
      if (c == q && (!multi || (peek(1) == q && peek(2) == q))) {
        for (int k = 0; k < (multi ? 3 : 1); ++k) advance();
        while (multi && peek() == q) advance();  // up to two quotes may close with the string
        return;
      }
      advance();
    }
  }

  void skip_comment() {
    while (i_ < s_.size() && peek() != '\n') advance();
  }

  void header() {
    const bool array = peek(1) == '[';
    advance();
    if (array) advance();
    int parts = 1;
    while (i_ < s_.size() && peek() != ']' && peek() != '\n') {
      if (peek() == '"' || peek() == '\'') {
        skip_string();
        continue;
      }
      if (peek() == '.' && ++parts + (array ? 1 : 0) > kMaxTomlDepth) return fail("table header");
      advance();
    }
    header_depth_ = parts + (array ? 1 : 0);
    mode_ = Mode::kValue;  // the rest of the line is `]`, a comment, or a syntax error
  }

  void step() {
    const char c = peek();
    if (c == '#') return skip_comment();
    if (c == '\n') {
      if (frames_.empty()) mode_ = Mode::kLineStart;
      return advance();
    }
    if (c == ' ' || c == '\t' || c == '\r') return advance();
    if (mode_ == Mode::kLineStart) {
      if (c == '[') return header();
      mode_ = Mode::kKey;
      key_parts_ = 1;
    }
    if (c == '"' || c == '\'') return skip_string();
    if (mode_ == Mode::kKey) {
      if (c == '.' && base() + ++key_parts_ > kMaxTomlDepth) return fail("dotted key");
      if (c == '=') {
        mode_ = Mode::kValue;
        value_depth_ = base() + key_parts_;
      }
      if (c == '}') close();
      return advance();
    }
    // Mode::kValue
    if (c == '{' || c == '[') {
      const int depth = c == '{' ? value_depth_ : value_depth_ + 1;
      if (depth > kMaxTomlDepth) return fail(c == '{' ? "inline table" : "array");
      frames_.push_back({c == '{', depth});
      if (c == '{') {
        mode_ = Mode::kKey;
        key_parts_ = 1;
      } else {
        value_depth_ = depth;
      }
    } else if (c == ']' || c == '}') {
      close();
    } else if (c == ',' && !frames_.empty() && frames_.back().inline_table) {
      mode_ = Mode::kKey;
      key_parts_ = 1;
    }
    advance();
  }

  void close() {
    if (!frames_.empty()) frames_.pop_back();  // unbalanced: toml++ reports it
    mode_ = Mode::kValue;
    if (!frames_.empty() && !frames_.back().inline_table) value_depth_ = frames_.back().depth;
  }

  struct Frame {
    bool inline_table;
    int depth;
  };
  std::string_view s_;
  size_t i_ = 0;
  uint32_t line_ = 1, col_ = 1;
  Mode mode_ = Mode::kLineStart;
  int header_depth_ = 0, key_parts_ = 1, value_depth_ = 0;
  std::vector<Frame> frames_;  // at most kMaxTomlDepth deep
  std::string error_;
};

}  // namespace

std::string check_toml_depth(std::string_view text) { return DepthScanner(text).run(); }

}  // namespace sqlstreams::config
