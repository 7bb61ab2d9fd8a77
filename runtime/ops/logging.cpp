#include "ops/logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/utf8.hpp"

namespace sqlstreams::ops {
namespace {

bool is_event_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }
bool is_key_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

bool reserved(std::string_view key) {
  return key == "ts" || key == "level" || key == "pid" || key == "event" || key == "msg";
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    nlohmann::ordered_json line;
    line["ts"] = timestamp(msg.time);
    line["level"] = std::string(spdlog::level::to_string_view(msg.level).data(),
                                spdlog::level::to_string_view(msg.level).size());
    line["pid"] = static_cast<int64_t>(getpid());
    LogFields parsed = parse_log_message(text);
    if (!parsed.event.empty()) line["event"] = parsed.event;
    for (auto& [key, value] : parsed.fields) {
      const std::string name = reserved(key) ? key + "_" : key;
      if (!line.contains(name)) line[name] = std::move(value);  // the first one counts
    }
    line["msg"] = std::string(text);
    std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(out.data(), out.data() + out.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }

 private:
  static std::string timestamp(spdlog::log_clock::time_point t) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
    return buf;
  }
};

// Text lines: the message with control characters escaped (common/utf8 escape_for_text), so
// text from producers and plugins can neither forge a second line nor drive the terminal.
class TextFormatter final : public spdlog::formatter {
 public:
  TextFormatter() : inner_(std::make_unique<spdlog::pattern_formatter>(kTextPattern)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string escaped =
        escape_for_text(std::string_view(msg.payload.data(), msg.payload.size()));
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(escaped.data(), escaped.size());
    inner_->format(copy, dest);
    msg.color_range_start = copy.color_range_start;  // mutable: the color sink reads them
    msg.color_range_end = copy.color_range_end;
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<TextFormatter>();
  }

 private:
  static constexpr const char* kTextPattern = "%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v";
  std::unique_ptr<spdlog::formatter> inner_;
};

// journald's priority in front of each line of `inner` (see logging.hpp).
class JournalFormatter final : public spdlog::formatter {
 public:
  explicit JournalFormatter(std::unique_ptr<spdlog::formatter> inner) : inner_(std::move(inner)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string_view prefix = syslog_prefix(msg.level);
    dest.append(prefix.data(), prefix.data() + prefix.size());
    inner_->format(msg, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JournalFormatter>(inner_->clone());
  }

 private:
  std::unique_ptr<spdlog::formatter> inner_;
};

// A decimal number that is all of `text`.
bool parse_decimal(std::string_view text, uint64_t& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

bool is_journal_stream(std::string_view journal_stream, uint64_t device, uint64_t inode) {
  const size_t colon = journal_stream.find(':');
  if (colon == std::string_view::npos) return false;
  uint64_t d = 0, i = 0;
  return parse_decimal(journal_stream.substr(0, colon), d) &&
         parse_decimal(journal_stream.substr(colon + 1), i) && d == device && i == inode;
}

bool stderr_is_journal() {
  const char* value = std::getenv("JOURNAL_STREAM");
  struct stat st {};
  if (value == nullptr || ::fstat(STDERR_FILENO, &st) != 0) return false;
  return is_journal_stream(value, static_cast<uint64_t>(st.st_dev),
                           static_cast<uint64_t>(st.st_ino));
}

std::string_view syslog_prefix(spdlog::level::level_enum level) {
  switch (level) {  // sd-daemon.h SD_CRIT, SD_ERR, SD_WARNING, SD_INFO, SD_DEBUG
    case spdlog::level::critical:
      return "<2>";
    case spdlog::level::err:
      return "<3>";
    case spdlog::level::warn:
      return "<4>";
    case spdlog::level::debug:
    case spdlog::level::trace:
      return "<7>";
    default:
      return "<6>";
  }
}

std::unique_ptr<spdlog::formatter> make_journal_formatter(
    std::unique_ptr<spdlog::formatter> inner) {
  return std::make_unique<JournalFormatter>(std::move(inner));
}

LogFields parse_log_message(std::string_view m) {
  LogFields out;
  size_t i = 0;
  while (i < m.size() && is_event_char(m[i])) ++i;
  if (i == 0 || m[0] == '-' || (i < m.size() && m[i] != ' ' && m[i] != ':')) return out;
  out.event = std::string(m.substr(0, i));
  if (i < m.size() && m[i] == ':') return out;
  while (i < m.size() && m[i] == ' ') {
    size_t k = i + 1;
    size_t key_end = k;
    while (key_end < m.size() && is_key_char(m[key_end])) ++key_end;
    if (key_end == k || key_end >= m.size() || m[key_end] != '=') break;
    std::string key(m.substr(k, key_end - k));
    size_t v = key_end + 1;
    std::string value;
    size_t end;
    bool last = false;
    if (v < m.size() && m[v] == '"') {
      // Quoted (log_quoted): up to the first unescaped quote; \" and \\ stand for " and \.
      size_t close = v + 1;
      for (; close < m.size() && m[close] != '"'; ++close) {
        if (m[close] == '\\' && close + 1 < m.size()) ++close;
        value.push_back(m[close]);
      }
      if (close >= m.size()) break;
      end = close + 1;
      if (end < m.size() && m[end] == ':') last = true;
    } else {
      end = m.find(' ', v);
      if (end == std::string_view::npos) end = m.size();
      std::string_view raw = m.substr(v, end - v);
      if (!raw.empty() && raw.back() == ':') {
        raw.remove_suffix(1);
        last = true;
      }
      value = std::string(raw);
    }
    out.fields.emplace_back(std::move(key), std::move(value));
    i = end;
    if (last) break;
  }
  return out;
}

std::string log_quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::unique_ptr<spdlog::formatter> make_json_formatter() {
  return std::make_unique<JsonFormatter>();
}

std::unique_ptr<spdlog::formatter> make_text_formatter() {
  return std::make_unique<TextFormatter>();
}

void setup_logging(const std::string& level, config::LogFormat format) {
  bool json = format == config::LogFormat::kJson ||
              (format == config::LogFormat::kAuto && !isatty(STDERR_FILENO));
  auto logger = spdlog::stderr_color_mt("sqlstreams");
  auto formatter = json ? make_json_formatter() : make_text_formatter();
  if (stderr_is_journal()) formatter = make_journal_formatter(std::move(formatter));
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace sqlstreams::ops
