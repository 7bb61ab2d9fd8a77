// The declaration of every TOML key (R11): one row per key — name, type, default, constraint,
// one-line description, and where the value goes. These rows drive parsing, validation and
// defaults (walk_table) and the options table (config_schema). Cross-field rules sit next to
// the keys they relate. The struct defaults in config.hpp must agree (a test checks it).
#include <limits>

#include "config/walk.hpp"

// Each row names only the fields it needs (designated initializers); the rest start empty.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace sqlstreams::config::schema {
namespace {

constexpr Millis kPositive{1};
constexpr Millis kZero{0};
// Upper bounds: no key accepts a value that cannot work ("1e11 days" was once accepted;
// docs/operating/security.md#secrets-and-configuration).
constexpr Millis kHour{3'600'000};
constexpr Millis kDay{86'400'000};
constexpr Millis kYear{365 * kDay.count()};
constexpr Millis kCentury{36'500 * kDay.count()};
constexpr int64_t kMaxPartitionSize = 1'000'000'000;
constexpr size_t kMaxPath = 4096;  // PATH_MAX
constexpr size_t kMaxName = 255;
constexpr int64_t kMaxReadCacheBytes = int64_t{64} << 30;  // 64 GiB per stream
constexpr int64_t kMaxGroupBytes = int64_t{64} << 30;      // batch_bytes, queue_bytes

// Spellings in enum order (set_enum relies on it).
constexpr std::array<std::string_view, 2> kMigrateModes{"auto", "check"};
constexpr std::array<std::string_view, 5> kLogLevels{"trace", "debug", "info", "warn", "error"};
constexpr std::array<std::string_view, 3> kLogFormats{"auto", "text", "json"};
constexpr std::array<std::string_view, 2> kStarts{"beginning", "head"};
constexpr std::array<std::string_view, 3> kAuditModes{"off", "failures", "all"};
constexpr std::array<std::string_view, 2> kIsolations{"inprocess", "process"};
constexpr std::array<std::string_view, 2> kOrderings{"none", "key"};
constexpr std::array<std::string_view, 2> kOrderingDeads{"release", "hold"};
constexpr std::array<std::string_view, 2> kUnacceptedVersions{"keep", "skip"};

Value str(const char* s) { return std::string(s); }

}  // namespace

const Table<Config>& root_table() {
  static const Table<Config> table{{
      {.name = "database",
       .type = Type::kTable,
       .doc = "where the messages live",
       .nested = sub_table(&Config::database, &database_table)},
      {.name = "host",
       .type = Type::kTable,
       .doc = "this host process",
       .nested = sub_table(&Config::host, &host_table)},
      {.name = "streams",
       .type = Type::kTableArray,
       .doc = "[[streams]]: the streams to declare",
       .absent = "none",
       .nested = table_array(&Config::streams, &stream_table)},
      {.name = "groups",
       .type = Type::kTableArray,
       .doc = "[[groups]]: the consumer groups to run",
       .absent = "none",
       .nested = table_array(&Config::groups, &group_table)},
  }};
  return table;
}

const Table<DatabaseConfig>& database_table() {
  using D = DatabaseConfig;
  static const Table<D> table{{
      {.name = "url_file",
       .type = Type::kString,
       .constraint = max_length(kMaxPath),
       .doc = "file whose first line is the database URL (SQLSTREAMS_DATABASE_URL wins)",
       .absent = "use SQLSTREAMS_DATABASE_URL",
       .apply = set(&D::url_file)},
      {.name = "schema",
       .type = Type::kString,
       .def = str("sqlstreams"),
       .constraint = identifier(),
       .doc = "PostgreSQL schema holding SQLStreams' tables",
       .apply = set(&D::schema)},
      {.name = "connect_timeout",
       .type = Type::kDuration,
       .def = Millis{5000},
       .constraint = duration_range(kPositive, kHour),
       .doc = "give up connecting after this long",
       .apply = set(&D::connect_timeout)},
      {.name = "migrate_lock_timeout",
       .type = Type::kDuration,
       .def = Millis{60'000},
       .constraint = duration_range(kPositive, kDay),
       .doc = "wait this long for the migrations' advisory lock, then name its holder and stop",
       .apply = set(&D::migrate_lock_timeout)},
      {.name = "migrate",
       .type = Type::kString,
       .def = str("auto"),
       .constraint = one_of(kMigrateModes),
       .doc = "auto: apply pending migrations at start; check: refuse to start if any are pending",
       .apply = set_enum(&D::migrate, kMigrateModes)},
  }};
  return table;
}

const Table<HostConfig>& host_table() {
  using H = HostConfig;
  static const Table<H> table{{
      {.name = "name",
       .type = Type::kString,
       .constraint = max_length(kMaxName),
       .doc = "this host's name in status, leases and heartbeats",
       .absent = "the machine's hostname",
       .apply = set(&H::name)},
      {.name = "plugin_dir",
       .type = Type::kString,
       .def = str("plugins"),
       .constraint = max_length(kMaxPath),
       .doc = "plugins load only from here; relative to the config file's folder",
       .apply = set(&H::plugin_dir)},
      {.name = "shutdown_timeout",
       .type = Type::kDuration,
       .def = Millis{30'000},
       .constraint = duration_range(kZero, kDay),
       .doc = "on SIGTERM, drain in-flight work for up to this long",
       .apply = set(&H::shutdown_timeout)},
      {.name = "log_level",
       .type = Type::kString,
       .def = str("info"),
       .constraint = one_of(kLogLevels),
       .doc = "least severe level that is logged",
       .apply = set(&H::log_level)},
      {.name = "log_format",
       .type = Type::kString,
       .def = str("auto"),
       .constraint = one_of(kLogFormats),
       .doc = "auto: text on a terminal, JSON otherwise",
       .apply = set_enum(&H::log_format, kLogFormats)},
      {.name = "http_listen",
       .type = Type::kString,
       .def = str("127.0.0.1:9187"),
       .constraint = listen_address(),
       .doc = "/healthz, /metrics and status page; \"\" disables; not loopback: needs "
              "http_allow_remote",
       .apply = set(&H::http_listen)},
      {.name = "http_allow_remote",
       .type = Type::kBool,
       .def = false,
       .doc = "let http_listen be a non-loopback address (logged as a warning: the dead-letter "
              "view shows message payloads)",
       .apply = set(&H::http_allow_remote)},
      {.name = "maintenance_ttl",
       .type = Type::kDuration,
       .def = Millis{15'000},
       .constraint = duration_range(kPositive, kDay),
       .doc = "a dead host's janitor and advancer leases move to another host after this",
       .apply = set(&H::maintenance_ttl)},
      {.name = "janitor_period",
       .type = Type::kDuration,
       .def = Millis{30'000},
       .constraint = duration_range(kPositive, 7 * kDay),
       .doc = "how often each stream's janitor runs (jittered by 25%)",
       .apply = set(&H::janitor_period)},
      {.name = "status_interval",
       .type = Type::kDuration,
       .def = Millis{5000},
       .constraint = duration_range(Millis{100}, kHour),
       .doc = "how often /metrics, /readyz and the status page re-read the fleet's status",
       .apply = set(&H::status_interval)},
      {.name = "read_cache_bytes",
       .type = Type::kInt,
       .def = int64_t{64} << 20,
       .constraint = int_range(0, kMaxReadCacheBytes),
       .doc = "per stream read by 2+ groups of this host: bytes of one group's range reads kept "
              "for the others; 0 = off; applies at restart",
       .apply = set(&H::read_cache_bytes)},
  }};
  return table;
}

const Table<StreamConfig>& stream_table() {
  using S = StreamConfig;
  static const Table<S> table{{
      {.name = "name",
       .type = Type::kString,
       .required = true,
       .constraint = name_grammar(),
       .doc = "stream name, unique in the file",
       .apply = set(&S::name)},
      {.name = "partition_size",
       .type = Type::kInt,
       .def = int64_t{1'000'000},
       .constraint = int_range(1, kMaxPartitionSize),
       .doc = "message ids per partition table",
       .apply = set(&S::partition_size)},
      {.name = "retention",
       .type = Type::kDuration,
       .constraint = duration_range(kPositive, kCentury),
       .doc = "drop partitions whose newest message is older than this (fleet-wide: set when the "
              "stream is created, then by `sqlstreams stream set`)",
       .absent = "forever",
       .apply = set(&S::retention)},
      {.name = "allow_drop_past_committed",
       .type = Type::kBool,
       .def = false,
       .doc = "retention may drop messages some group has not committed yet (fleet-wide, as "
              "retention)",
       .apply = set(&S::allow_drop_past_committed)},
      {.name = "max_payload_bytes",
       .type = Type::kInt,
       .def = int64_t{1 << 20},
       .constraint = int_range(1, 64 << 20),
       .doc = "producers are refused larger payloads (fleet-wide, as retention)",
       .apply = set(&S::max_payload_bytes)},
      {.name = "notify",
       .type = Type::kBool,
       .def = false,
       .doc = "pg_notify a wake-up hint per producing transaction (fleet-wide, as retention)",
       .apply = set(&S::notify)},
      {.name = "idempotency_window",
       .type = Type::kDuration,
       .def = Millis{kDay},
       .constraint = duration_range(kPositive, kCentury),
       .doc = "a produce with an idempotency key seen this recently returns the first id and "
              "writes nothing (fleet-wide, as retention)",
       .apply = set(&S::idempotency_window)},
      {.name = "audit_retention",
       .type = Type::kDuration,
       .constraint = duration_range(kPositive, kCentury),
       .doc = "delete audit-trail rows older than this",
       .absent = "forever",
       .apply = set(&S::audit_retention)},
  }};
  return table;
}

const Table<GroupConfig>& group_table() {
  using G = GroupConfig;
  static const Table<G> table{
      {
          {.name = "name",
           .type = Type::kString,
           .required = true,
           .constraint = name_grammar(),
           .doc = "group name, unique per stream",
           .apply = set(&G::name)},
          {.name = "stream",
           .type = Type::kString,
           .required = true,
           .constraint = name_grammar(),
           .doc = "the [[streams]] entry this group consumes",
           .apply = set(&G::stream)},
          {.name = "plugin",
           .type = Type::kString,
           .required = true,
           .constraint = file_name(),
           .doc = "plugin file inside host.plugin_dir",
           .apply = set(&G::plugin)},
          {.name = "handler",
           .type = Type::kString,
           .required = true,
           .constraint = max_length(kMaxName),
           .doc = "handler name exported by the plugin",
           .apply = set(&G::handler)},
          {.name = "concurrency",
           .type = Type::kInt,
           .def = int64_t{4},
           .constraint = int_range(1, 1024),
           .doc = "worker threads running the handler",
           .apply = set(&G::concurrency)},
          {.name = "batch_size",
           .type = Type::kInt,
           .def = int64_t{500},
           .constraint = int_range(1, 100'000),
           .doc = "message ids per claimed range",
           .apply = set(&G::batch_size)},
          {.name = "queue_ranges",
           .type = Type::kInt,
           .def = int64_t{4},
           .constraint = int_range(1, 1024),
           .doc = "claimed ranges buffered ahead of the workers",
           .apply = set(&G::queue_ranges)},
          {.name = "batch_bytes",
           .type = Type::kInt,
           .def = int64_t{64} << 20,
           .constraint = int_range(1, kMaxGroupBytes),
           .doc = "payload bytes per claimed range (it ends before the message that would pass "
                  "them; a larger message is claimed alone)",
           .apply = set(&G::batch_bytes)},
          {.name = "queue_bytes",
           .type = Type::kInt,
           .def = int64_t{256} << 20,
           .constraint = int_range(1, kMaxGroupBytes),
           .doc = "payload bytes of the claimed ranges held until committed; claiming waits "
                  "above it (one message always fits)",
           .apply = set(&G::queue_bytes)},
          {.name = "poll_interval",
           .type = Type::kDuration,
           .def = Millis{100},
           .constraint = duration_range(kPositive, kHour),
           .doc = "poll period while there is work",
           .apply = set(&G::poll_interval)},
          {.name = "max_poll_interval",
           .type = Type::kDuration,
           .def = Millis{1000},
           .constraint = duration_range(kPositive, kHour),
           .doc = "idle backoff ceiling; >= poll_interval",
           .apply = set(&G::max_poll_interval)},
          {.name = "fence_warn_after",
           .type = Type::kDuration,
           .def = Millis{5000},
           .constraint = duration_range(kPositive, kDay),
           .doc = "claims held this long by an open producer log fence-held, naming it",
           .apply = set(&G::fence_warn_after)},
          {.name = "fence_fails_readyz",
           .type = Type::kBool,
           .def = false,
           .doc = "while fence-held lasts (past fence_warn_after), /readyz answers 503",
           .apply = set(&G::fence_fails_readyz)},
          {.name = "lease_ttl",
           .type = Type::kDuration,
           .def = Millis{60'000},
           .constraint = duration_range(kPositive, 2 * kDay),
           .doc = "a claimed range returns to others after this; > handler_timeout",
           .apply = set(&G::lease_ttl)},
          {.name = "handler_timeout",
           .type = Type::kDuration,
           .def = Millis{30'000},
           .constraint = duration_range(kPositive, kDay),
           .doc = "a handler still running then has failed",
           .apply = set(&G::handler_timeout)},
          {.name = "max_hung_handlers",
           .type = Type::kInt,
           .def = int64_t{8},
           .constraint = int_range(1, 1000),
           .doc = "written-off handler threads still running; at this many the group pauses",
           .apply = set(&G::max_hung_handlers)},
          {.name = "max_in_flight",
           .type = Type::kInt,
           .def = int64_t{1000},
           .constraint = int_range(1, 100'000),
           .doc = "messages an asynchronous handler holds at once (a synchronous one: concurrency)",
           .apply = set(&G::max_in_flight)},
          {.name = "max_range_reclaims",
           .type = Type::kInt,
           .def = int64_t{3},
           .constraint = int_range(1, 100),
           .doc = "a range whose lease expired this often is split up",
           .apply = set(&G::max_range_reclaims)},
          {.name = "start",
           .type = Type::kString,
           .def = str("beginning"),
           .constraint = one_of(kStarts),
           .doc = "where a new group's cursor starts: oldest kept message, or the head",
           .apply = set_enum(&G::start, kStarts)},
          {.name = "schema_versions",
           .type = Type::kIntList,
           .constraint = version_list(),
           .doc = "payload versions the group runs; only versions its handler declares",
           .absent = "the version the handler declares",
           .apply =
               [](G& g, const Value& v) {
                 assign(g.schema_versions, v);
                 g.schema_versions_given = true;
               }},
          {.name = "unaccepted_versions",
           .type = Type::kString,
           .def = str("keep"),
           .constraint = one_of(kUnacceptedVersions),
           .doc = "a message of a version not in schema_versions: kept until the group accepts "
                  "it, or skipped for good",
           .apply = set_enum(&G::unaccepted_versions, kUnacceptedVersions)},
          {.name = "audit",
           .type = Type::kString,
           .def = str("failures"),
           .constraint = one_of(kAuditModes),
           .doc = "which outcomes the audit trail records",
           .apply = set_enum(&G::audit, kAuditModes)},
          {.name = "isolation",
           .type = Type::kString,
           .def = str("inprocess"),
           .constraint = one_of(kIsolations),
           .doc = "where the handler runs: in the host, or in supervised child processes",
           .apply = set_enum(&G::isolation, kIsolations)},
          {.name = "child_stderr_lines_per_second",
           .type = Type::kInt,
           .def = int64_t{200},
           .constraint = int_range(1, 100'000),
           .doc = "isolation = \"process\": stderr lines per second each child may log (the rest "
                  "are counted)",
           .apply = set(&G::child_stderr_lines_per_second)},
          {.name = "child_stderr_bytes_per_second",
           .type = Type::kInt,
           .def = int64_t{64} << 10,
           .constraint = int_range(1024, int64_t{64} << 20),
           .doc = "isolation = \"process\": stderr bytes per second each child may log",
           .apply = set(&G::child_stderr_bytes_per_second)},
          {.name = "ordering",
           .type = Type::kString,
           .def = str("none"),
           .constraint = one_of(kOrderings),
           .doc = "key: one message of a message_key at a time, in id order; fixed at creation",
           .apply = set_enum(&G::ordering, kOrderings)},
          {.name = "ordering_dead",
           .type = Type::kString,
           .def = str("release"),
           .constraint = one_of(kOrderingDeads),
           .doc = "ordering = \"key\": a dead message releases its key's later ones, or holds them",
           .apply = set_enum(&G::ordering_dead, kOrderingDeads)},
          {.name = "emits",
           .type = Type::kStringList,
           .def = std::vector<std::string>{},
           .constraint = stream_list(),
           .doc = "streams the handler may emit to; its outputs are written with the ack of "
                  "each successful call",
           .apply = set(&G::emits)},
          {.name = "max_emits_per_message",
           .type = Type::kInt,
           .def = int64_t{100},
           .constraint = int_range(1, 100'000),
           .doc = "emits: outputs one handler call may emit",
           .apply = set(&G::max_emits_per_message)},
          {.name = "max_emit_bytes_per_message",
           .type = Type::kInt,
           .def = int64_t{4} << 20,
           .constraint = int_range(1024, int64_t{1} << 30),
           .doc = "emits: payload bytes (as sent) one handler call may emit",
           .apply = set(&G::max_emit_bytes_per_message)},
          {.name = "retry",
           .type = Type::kTable,
           .doc = "[groups.retry]: the retry policy",
           .nested = sub_table(&G::retry, &retry_table)},
          {.name = "config",
           .type = Type::kFreeTable,
           .doc = "[groups.config]: handed to the plugin as JSON",
           .absent = "{}",
           .nested = json_object(&G::plugin_config_json, &G::config_keys)},
      },
      {
          {"max_poll_interval", Relation::kAtLeast, "poll_interval"},
          {"lease_ttl", Relation::kGreater, "handler_timeout"},
      }};
  return table;
}

const Table<RetryPolicy>& retry_table() {
  using R = RetryPolicy;
  static const Table<R> table{{
                                  {.name = "max_retries",
                                   .type = Type::kInt,
                                   .def = int64_t{3},
                                   .constraint = int_range(0, 1000),
                                   .doc = "retries after the first attempt, then dead",
                                   .apply = set(&R::max_retries)},
                                  {.name = "initial_backoff",
                                   .type = Type::kDuration,
                                   .def = Millis{5000},
                                   .constraint = duration_range(kZero, kYear),
                                   .doc = "wait after the first failure",
                                   .apply = set(&R::initial_backoff)},
                                  {.name = "base_delay",
                                   .type = Type::kDuration,
                                   .def = Millis{1000},
                                   .constraint = duration_range(kZero, kYear),
                                   .doc = "later failures wait base_delay * exponent^(n-1)",
                                   .apply = set(&R::base_delay)},
                                  {.name = "exponent",
                                   .type = Type::kFloat,
                                   .def = 2.0,
                                   .constraint = float_range(1.0, 100.0),
                                   .doc = "growth factor of the delay",
                                   .apply = set(&R::exponent)},
                                  {.name = "max_delay",
                                   .type = Type::kDuration,
                                   .def = Millis{300'000},
                                   .constraint = duration_range(kZero, kYear),
                                   .doc = "ceiling of the delay; >= base_delay",
                                   .apply = set(&R::max_delay)},
                                  {.name = "jitter",
                                   .type = Type::kFloat,
                                   .def = 0.0,
                                   .constraint = float_range(0.0, 1.0),
                                   .doc = "random extra delay, as a fraction of the delay",
                                   .apply = set(&R::jitter)},
                              },
                              {
                                  {"max_delay", Relation::kAtLeast, "base_delay"},
                              }};
  return table;
}

}  // namespace sqlstreams::config::schema

namespace sqlstreams::config {
namespace {

template <typename S>
void append_rows(std::vector<KeyDoc>& rows, std::string_view prefix,
                 const schema::Table<S>& table) {
  for (const schema::Key<S>& key : table.keys) {
    KeyDoc row;
    row.path = std::string(prefix) + std::string(key.name);
    row.type = std::string(schema::type_name(key.type));
    if (key.required) {
      row.default_value = "required";
    } else if (!std::holds_alternative<std::monostate>(key.def)) {
      row.default_value = schema::format_value(key.def);
    } else {
      row.default_value = std::string(key.absent);
    }
    row.constraint = key.constraint.text;
    row.description = std::string(key.doc);
    rows.push_back(std::move(row));
  }
}

}  // namespace

std::vector<KeyDoc> config_schema() {
  std::vector<KeyDoc> rows;
  append_rows(rows, "", schema::root_table());
  append_rows(rows, "database.", schema::database_table());
  append_rows(rows, "host.", schema::host_table());
  append_rows(rows, "streams[].", schema::stream_table());
  append_rows(rows, "groups[].", schema::group_table());
  append_rows(rows, "groups[].retry.", schema::retry_table());
  return rows;
}

std::string config_schema_markdown() {
  auto cell = [](std::string text) {
    for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) {
      text.insert(at, "\\");
    }
    return text;
  };
  std::string out = "| key | type | default | constraint | description |\n|---|---|---|---|---|\n";
  for (const KeyDoc& row : config_schema()) {
    out += "| `" + row.path + "` | " + row.type + " | " + cell(row.default_value) + " | " +
           cell(row.constraint) + " | " + cell(row.description) + " |\n";
  }
  return out;
}

}  // namespace sqlstreams::config
