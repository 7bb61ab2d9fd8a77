// ops/logging — process-wide log set-up (spdlog). Human-readable on a terminal, one JSON
// object per line otherwise (or as configured by host.log_format). Every message starts with a
// stable event name (`dead-lettered`, `lease-reclaimed`, `range-quarantined`,
// `worker-acquired`, `reload-applied`, ...) followed by `key=value` pairs and, after a colon,
// free text:  "lease-lost stream=s group=g low=1 high=500: outcomes discarded".
// In JSON the event and the leading pairs also become fields (values as strings, so a field
// keeps one type), next to the whole message:
//   {"ts":"2026-11-29T20:25:58.123Z","level":"warn","pid":7,"event":"lease-lost",
//    "stream":"s","group":"g","low":"1","high":"500","msg":"lease-lost stream=s ..."}
// A value from foreign text (plugin errors, operator names) is written as log_quoted(text):
// in quotes, with `"` and `\` escaped by a backslash, so it ends exactly where it was meant to
// and cannot add or change fields; and when a key occurs twice, the first value is the field.
// Invalid UTF-8 is replaced, so every line is valid JSON. Text lines escape control characters
// (C0 incl. newlines, DEL, C1, invalid bytes: common/utf8 escape_for_text), so foreign text
// (plugin errors, keys) can neither forge a log line nor send terminal escape sequences.
// Never log payloads or passwords (print connection strings only as store::describe_conninfo
// or Conninfo::display).
// Under journald (a systemd unit's stderr: systemd.exec(5) JOURNAL_STREAM), each line, text or
// JSON, starts with its syslog priority as "<N>" (sd-daemon.h: <2> critical, <3> error,
// <4> warn, <6> info, <7> debug and trace); journald strips it into PRIORITY= (its
// SyslogLevelPrefix=, on by default), so MESSAGE is the line as without journald and
// `journalctl -p warning` finds the host's warnings and errors. Anywhere else nothing changes.
// Threading: call setup_logging() once from main before starting threads; the other functions
// are safe from any thread.
#pragma once

#include <spdlog/common.h>
#include <spdlog/formatter.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace sqlstreams::ops {

void setup_logging(const std::string& level, config::LogFormat format);

// The event name and the leading key=value pairs of a message (see above).
struct LogFields {
  std::string event;
  std::vector<std::pair<std::string, std::string>> fields;
};
LogFields parse_log_message(std::string_view message);

// `text` as a quoted log value: "..." with `"` and `\` escaped (see above).
std::string log_quoted(std::string_view text);

// True when `journal_stream` (the value of JOURNAL_STREAM: "<device>:<inode>", in decimal)
// names the file with `device` and `inode`: stderr is then the journal's stream.
bool is_journal_stream(std::string_view journal_stream, uint64_t device, uint64_t inode);
// is_journal_stream(getenv("JOURNAL_STREAM"), fstat(STDERR_FILENO)): systemd connected this
// process's stderr to journald (a child whose stderr is a pipe or a file inherits the variable,
// not the stream: false).
bool stderr_is_journal();
// The syslog priority prefix of a line at `level`: "<3>" for err, ... (see above).
std::string_view syslog_prefix(spdlog::level::level_enum level);
// `inner`, with syslog_prefix(level) in front of every line (setup_logging() wraps its formatter
// in it when stderr_is_journal()).
std::unique_ptr<spdlog::formatter> make_journal_formatter(std::unique_ptr<spdlog::formatter> inner);

// The JSON-lines formatter setup_logging() installs (exposed for tests).
std::unique_ptr<spdlog::formatter> make_json_formatter();
// The text formatter (timestamp, level, escaped message) setup_logging() installs otherwise.
std::unique_ptr<spdlog::formatter> make_text_formatter();

}  // namespace sqlstreams::ops
