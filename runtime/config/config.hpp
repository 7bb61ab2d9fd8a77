// config — the typed, validated configuration of one host (docs/design.md#configuration).
// Owns: the TOML schema (declared once in schema.cpp), parsing with toml++, closed-world
// validation that reports every problem at once as `file:line:col: path.key: problem (got X)`,
// and resolution of the database URL (SQLSTREAMS_DATABASE_URL or database.url_file).
// Threading: load_config() is a pure function of the file and environment; Config is a value.
// Options table: config_schema() (every key with type, default, constraint and description);
// config/example.toml shows every option with a one-line comment.
//
// Example (config/example.toml documents every option):
//   [database]                     # url from SQLSTREAMS_DATABASE_URL or url_file
//   [host]
//   plugin_dir = "../build/release/plugins"
//   [[streams]]
//   name = "payments.requested"
//   [[groups]]
//   name = "charge-cards"
//   stream = "payments.requested"
//   plugin = "payments.so"
//   handler = "charge-cards"
//   [groups.config]                # handed to the plugin as JSON
//   provider = "ok"
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/duration.hpp"

namespace sqlstreams::config {

struct SourcePosition {
  std::string file;
  int line = 0;
  int column = 0;
  bool operator==(const SourcePosition&) const = default;
};

// Where each key of a [groups.config] table is written, by its path inside the config object
// ("" = the table itself, "mode", "limits.mode", "orders[2]"), so a handler's complaint about a
// key (set_error_key) points at file:line:col. Positions never make two configs differ (a reload
// compares what a group is, not where it is written).
struct KeyPositions {
  std::map<std::string, SourcePosition> at;
  bool operator==(const KeyPositions&) const { return true; }
  // The position of `key_path`, else of its nearest written parent, else of the table; nullopt
  // when the group has no config table.
  std::optional<SourcePosition> locate(std::string_view key_path) const;
};

enum class MigrateMode { kAuto, kCheck };
enum class LogFormat { kAuto, kText, kJson };
enum class GroupStart { kBeginning, kHead };
enum class AuditMode { kOff, kFailures, kAll };
// Where a group's handler runs: in the host process, or in supervised child processes
// (runtime/isolation/README.md).
enum class Isolation { kInProcess, kProcess };
// Per-key ordering (docs/design.md#per-key-ordering): none = unordered (the default); key = one
// message of a message_key at a time, in id order, across every host of the group.
enum class Ordering { kNone, kKey };
// What a dead message does to the later messages of its key in an ordered group: release them
// (the default), or hold them until an operator retries or discards it.
enum class OrderingDead { kRelease, kHold };
// A message of a schema version the group does not accept: kept (an exception row `parked`, with
// its payload, delivered once the group accepts the version) or passed over for good.
enum class UnacceptedVersions { kKeep, kSkip };

struct DatabaseConfig {
  std::optional<std::string> url_file;  // resolved relative to the config file's folder
  std::string schema = "sqlstreams";    // identifier: ^[a-z_][a-z0-9_]{0,62}$
  Millis connect_timeout{5000};
  Millis migrate_lock_timeout{60'000};       // then the holder of the advisory lock is named
  MigrateMode migrate = MigrateMode::kAuto;  // run: apply pending migrations, or refuse
};

struct HostConfig {
  std::string name;                    // default: the machine's hostname
  std::string plugin_dir = "plugins";  // resolved relative to the config file's folder
  Millis shutdown_timeout{30'000};
  std::string log_level = "info";  // trace|debug|info|warn|error
  LogFormat log_format = LogFormat::kAuto;
  std::string http_listen = "127.0.0.1:9187";  // "" disables the HTTP server; config/listen.hpp
  bool http_allow_remote = false;              // required for a non-loopback http_listen
  Millis maintenance_ttl{15'000};  // maintenance-worker leases and the heartbeat; renewed at half
  Millis janitor_period{30'000};   // per stream, jittered ±25%
  Millis status_interval{5000};    // /metrics gauges, /readyz and the status page re-read the DB
  // Per stream that two or more groups of this host consume: bytes of range reads kept for the
  // other groups (consume/read_cache); 0 = off. Takes effect at a restart.
  int64_t read_cache_bytes = int64_t{64} << 20;
};

struct StreamConfig {
  SourcePosition pos;
  std::string name;                    // ^[a-z0-9][a-z0-9._-]{0,127}$
  int64_t partition_size = 1'000'000;  // ids per partition, >= 1
  std::optional<Millis> retention;     // none = keep forever
  bool allow_drop_past_committed = false;
  int32_t max_payload_bytes = 1 << 20;    // 1 .. 64 MiB
  bool notify = false;                    // pg_notify wake-up hint per producing txn
  Millis idempotency_window{86'400'000};  // idempotency keys are remembered this long (V011)
  std::optional<Millis> audit_retention;  // none = keep the audit trail forever
  bool operator==(const StreamConfig&) const = default;
};

struct RetryPolicy {
  int32_t max_retries = 3;  // 0..1000
  Millis initial_backoff{5000};
  Millis base_delay{1000};
  double exponent = 2.0;      // >= 1.0
  Millis max_delay{300'000};  // >= base_delay
  double jitter = 0.0;        // 0.0 .. 1.0, fraction of the delay
  bool operator==(const RetryPolicy&) const = default;
};

struct GroupConfig {
  SourcePosition pos;
  std::string name;                       // same grammar as stream names
  std::string stream;                     // must name a declared stream
  std::string plugin;                     // file name inside host.plugin_dir
  std::string handler;                    // handler name inside the plugin
  std::string plugin_config_json = "{}";  // [groups.config] as a JSON object
  KeyPositions config_keys;               // where each key of [groups.config] is written
  int32_t concurrency = 4;                // 1..1024 worker threads
  int32_t batch_size = 500;               // 1..100000 ids per range claim
  int32_t queue_ranges = 4;               // 1..1024 claimed ranges buffered per group
  // Payload bytes (octet_length of the payload text) of one claimed range, and of all the claimed
  // ranges this host holds for the group until they are committed
  // (docs/operating/configuration.md#byte-budgets); a message larger than either is still claimed,
  // alone. 1..64 GiB each.
  int64_t batch_bytes = int64_t{64} << 20;
  int64_t queue_bytes = int64_t{256} << 20;
  Millis poll_interval{100};       // poll period while busy / after a non-empty claim
  Millis max_poll_interval{1000};  // idle backoff ceiling (>= poll_interval)
  // Claims held back this long by the fence (an open producer of the stream) log fence-held,
  // naming the holder, and fence-released at the end.
  Millis fence_warn_after{5000};
  bool fence_fails_readyz = false;  // /readyz 503 while such a wait lasts
  Millis lease_ttl{60'000};         // range lease; must be > handler_timeout
  Millis handler_timeout{30'000};
  // 1..1000: handler threads written off at handler_timeout that are still running; at this
  // many the group pauses (stops claiming, /readyz 503) until some return.
  int32_t max_hung_handlers = 8;
  // 1..100000: messages an asynchronous handler (ABI 1.2 handle_async) has accepted and not yet
  // completed; a synchronous handler holds at most `concurrency` and ignores it.
  int32_t max_in_flight = 1000;
  int32_t max_range_reclaims = 3;  // 1..100
  GroupStart start = GroupStart::kBeginning;
  // Non-empty, each >= 1. When the config omits it (schema_versions_given false), the host
  // sets it to the version the handler declares at load (plugin_host::group_schema_versions).
  std::vector<int32_t> schema_versions{1};
  bool schema_versions_given = false;
  UnacceptedVersions unaccepted_versions = UnacceptedVersions::kKeep;
  AuditMode audit = AuditMode::kFailures;
  Isolation isolation = Isolation::kInProcess;
  // isolation = "process": what each child's stderr may put in the host's log, per second
  // (a burst of 5 seconds' worth); lines over it are dropped, logged as a count and counted in
  // sqlstreams_group_child_stderr_dropped_lines_total. Only with isolation = "process".
  int64_t child_stderr_lines_per_second = 200;
  int64_t child_stderr_bytes_per_second = 64 * 1024;
  // Fixed when the group is created (the database keeps them; a host whose config differs
  // refuses the group). ordering_dead may only be written when ordering = "key".
  Ordering ordering = Ordering::kNone;
  OrderingDead ordering_dead = OrderingDead::kRelease;
  // Outputs committed with the ack (docs/operating/emits.md): the streams a handler may emit
  // to (each a declared [[streams]] entry), and each call's budget of outputs and their
  // payload bytes. Empty: the group does not emit (nothing of it is set up).
  std::vector<std::string> emits;
  int32_t max_emits_per_message = 100;                    // 1..100000
  int64_t max_emit_bytes_per_message = int64_t{4} << 20;  // 1 KiB .. 1 GiB
  RetryPolicy retry;
  bool operator==(const GroupConfig&) const = default;  // a reload compares with pos cleared
};

struct Config {
  std::filesystem::path path;  // the file this came from (made absolute by load_config)
  DatabaseConfig database;
  HostConfig host;
  std::vector<StreamConfig> streams;
  std::vector<GroupConfig> groups;

  const StreamConfig* find_stream(std::string_view name) const;
  std::filesystem::path plugin_dir() const;  // host.plugin_dir resolved against path's folder
};

// Every problem found in one file, already formatted `file:line:col: path: problem (got X)`.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// Parses and validates; throws ConfigError listing every problem (never a partial Config).
Config load_config(const std::filesystem::path& file);

// SQLSTREAMS_DATABASE_URL wins; otherwise the first line of database.url_file (a regular file
// of at most kMaxUrlFileBytes). Throws ConfigError naming both sources when neither is set or
// the file cannot be read; never includes the file's content. The caller parses the URL
// (store::parse_conninfo) before using it.
std::string resolve_database_url(const Config& config);
// database.url_file resolved against the config file's folder; empty when not set.
std::filesystem::path url_file_path(const Config& config);

// One row of the options table, generated from the schema declaration (schema.cpp); drives
// `--print-config-schema` and the README options table. `path` uses "[]" for arrays of
// tables, e.g. "groups[].retry.max_delay".
struct KeyDoc {
  std::string path;
  std::string type;           // "integer", "duration", "string", ...
  std::string default_value;  // TOML spelling, "required", or what absence means
  std::string constraint;     // e.g. "1..1024", "auto|check"; "" when any value of the type
  std::string description;    // one line
};
std::vector<KeyDoc> config_schema();
std::string config_schema_markdown();  // the same rows as a Markdown table

// True when `name` matches ^[a-z0-9][a-z0-9._-]{0,127}$ (streams and groups).
bool is_valid_name(std::string_view name);

}  // namespace sqlstreams::config
